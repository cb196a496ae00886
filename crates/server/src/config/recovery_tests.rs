//! Every fault of a file, once: a key taken out for its fault and its section read again,
//! and no echo of it from the checks of what it would have changed.

use super::tests::err;

/// Every fault of a section is named, not the first: a bad key is taken out and the section
/// read again; a field then missing only because its bad value was taken out is not named
/// twice, while one truly missing is.
#[test]
fn every_fault_of_one_section_is_named_once() {
    let e = err("[server]\nlisten = 1\nport = 2\nshutdown_grace_seconds = 0\n");
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 3, "{e}");
    assert!(
        lines[0].starts_with("t.toml:2:10: server.listen: invalid type"),
        "{e}"
    );
    assert!(
        lines[1].starts_with("t.toml:3:1: server.port: unknown field"),
        "{e}"
    );
    assert!(
        lines[2].starts_with("t.toml:4:26: server.shutdown_grace_seconds:"),
        "{e}"
    );

    let e = err("[[schedules]]\nname = \"a\"\ncron = 5\ncommand = \"help\"\n");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("t.toml:3:8: schedules[0].cron: invalid type"),
        "{e}"
    );
    assert!(!e.contains("missing field"), "{e}");

    let e = err("[[schedules]]\nname = \"a\"\ncommand = \"help\"\n");
    assert!(e.contains("missing field `cron`"), "{e}");
}

/// A key taken out for its fault leaves no echo: the checks of what it would have changed
/// are skipped (a misspelt back end does not make its other keys "not a setting of echo"; a
/// misspelt store URL does not make its schema "only for postgres"), a parent with a fault
/// of its own is still declared, and a refused top-level key is named once.
#[test]
fn a_fault_is_named_once_and_leaves_no_echo() {
    let cases: &[(&str, &[&str])] = &[
        (
            "[agents.a]\nbackend = \"opnai\"\nbase_url = \"https://x/v1\"\nmodel = \"m\"\n",
            &["t.toml:2:11: agents.a.backend: unknown variant `opnai`"],
        ),
        (
            "[store]\nurl = \"postgress://h/db\"\nschema = \"sb\"\n",
            &["t.toml:2:7: store.url: must be sqlite://"],
        ),
        (
            "[agents.o]\nbackend = \"openai\"\nbase_url = 5\nmodel = \"m\"\n",
            &["t.toml:3:12: agents.o.base_url: invalid type: integer `5`"],
        ),
        (
            "[agents.c]\nbackend = \"command\"\ncommand = [5]\n",
            &["t.toml:3:12: agents.c.command: invalid type: integer `5`"],
        ),
        (
            "[agents.base]\nbackend = \"gpt\"\n[agents.child]\nparent = \"base\"\n",
            &["t.toml:2:11: agents.base.backend: unknown variant `gpt`"],
        ),
        (
            "[permissions]\nx = 1\n[grants.\"slack:U1\"]\nchannels = \"All\"\n[grants.\"http:x\"]\nactions = [\"nope:read\"]\n",
            &[
                "t.toml:1:2: permissions: `permissions` is not a configuration key",
                "t.toml:4:1: grants.\"slack:U1\".channels: `All` is not \"all\"",
                "t.toml:6:1: grants.\"http:x\".actions",
            ],
        ),
        (
            "[[schedules]]\nname = \"a\"\ncron = 5\ncommand = \"help\"\n[[schedules]]\nname = \"b\"\ncommand = \"help\"\n",
            &[
                "t.toml:3:8: schedules[0].cron: invalid type: integer `5`",
                "missing field `cron`",
            ],
        ),
        (
            "[store]\nurl = \"postgres://u@h:99999/db\"\n",
            &["t.toml:2:7: store.url: is not a URL the Postgres driver reads"],
        ),
        (
            "[store]\nurl = \"postgres://u@h/db\"\nschema = \"Bad-Name\"\n",
            &["t.toml:3:10: store.schema: schema name \"Bad-Name\""],
        ),
    ];
    for (text, want) in cases {
        let e = err(text);
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), want.len(), "{text}\n{e}");
        for (line, want) in lines.iter().zip(want.iter()) {
            assert!(
                line.starts_with(want) || line.contains(want),
                "{text}\n{line}\nlacks {want}"
            );
        }
    }
}
