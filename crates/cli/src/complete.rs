//! `switchboard completions <shell>`: the binary's own verbs and every registry command with
//! its arguments, from the same schema the registry parses with (`runs list --status <TAB>`
//! offers `live finished all`), so a shell completes what the command line takes.

use clap::{Arg, ArgAction, Command};
use commands::Registry;
use commands::args::{ArgKind, ArgSpec, ArgType};

/// The clap command of the whole command line: the local verbs, and the registry's groups
/// and commands beside them (`config`'s `get` and `set` under the local `config`).
pub fn whole_command_line(mut cli: Command) -> Command {
    let registry = Registry::catalogue();
    let mut groups: Vec<(String, Vec<&commands::Command>)> = Vec::new();
    for c in registry.commands() {
        let group =
            c.id.as_str()
                .split('.')
                .next()
                .unwrap_or_default()
                .to_owned();
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, members)) => members.push(c),
            None => groups.push((group, vec![c])),
        }
    }
    for (group, members) in groups {
        let single = members.len() == 1 && members.iter().all(|c| c.id.as_str() == group);
        if single {
            if let Some(c) = members.first() {
                cli = cli.subcommand(with_args(Command::new(group).about(c.summary), c));
            }
            continue;
        }
        let add = |parent: Command| {
            members.iter().fold(parent, |parent, c| {
                let name =
                    c.id.as_str()
                        .rsplit('.')
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                parent.subcommand(with_args(Command::new(name).about(c.summary), c))
            })
        };
        if cli.find_subcommand(&group).is_some() {
            cli = cli.mut_subcommand(group, add);
        } else {
            cli = cli.subcommand(add(registry_command(
                Command::new(group.clone()).about(format!("{group} commands")),
            )));
        }
    }
    cli
}

/// `command` with the arguments of a registry command's schema, and nothing the registry
/// would refuse (no `help` subcommand, no `--version`).
fn with_args(command: Command, c: &commands::Command) -> Command {
    c.args
        .specs()
        .iter()
        .fold(registry_command(command), |command, spec| {
            command.arg(arg_of(spec))
        })
}

/// A command the registry answers, not clap: it takes no `help` subcommand or `--version`.
fn registry_command(command: Command) -> Command {
    command
        .disable_help_subcommand(true)
        .disable_version_flag(true)
}

fn arg_of(spec: &ArgSpec) -> Arg {
    let arg = Arg::new(spec.name).help(spec.help);
    let arg = match spec.kind {
        ArgKind::Positional { rest } => {
            let arg = arg.value_name(spec.value_name);
            if rest {
                arg.num_args(1..).action(ArgAction::Append)
            } else {
                arg
            }
        }
        ArgKind::Flag => arg.long(spec.name).action(ArgAction::SetTrue),
        ArgKind::Value => arg.long(spec.name).value_name(spec.value_name),
    };
    match spec.ty {
        ArgType::Choice(words) => arg.value_parser(words.to_vec()),
        ArgType::Text | ArgType::Int { .. } => arg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every registry command is a path of the completion command, with each of its options.
    #[test]
    fn every_registry_command_and_option_is_completed() {
        let cli = whole_command_line(crate::Cli::command());
        for c in Registry::catalogue().commands() {
            let mut at = &cli;
            for word in c.id.as_str().split('.') {
                at = at
                    .find_subcommand(word)
                    .unwrap_or_else(|| panic!("{} has no `{word}`", c.id));
            }
            for spec in c.args.specs() {
                assert!(
                    at.get_arguments().any(|a| a.get_id() == spec.name),
                    "{} lacks {}",
                    c.id,
                    spec.name
                );
            }
        }
        let config = cli.find_subcommand("config").unwrap();
        let names: Vec<&str> = config.get_subcommands().map(|c| c.get_name()).collect();
        assert!(names.contains(&"check") && names.contains(&"get") && names.contains(&"set"));
    }
}
