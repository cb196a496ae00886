//! Builders: a grant is `grant("id", "tool")` with what differs from an `auto`, untainted,
//! never-expiring grant set by its methods.

use broker::{
    CallId, DataClass, Grant, GrantId, Mode, SessionId, Timestamp, ToolGrants, ToolRequest,
};

pub fn grant(id: &str, tool: &str) -> Grant {
    Grant {
        id: GrantId::new(id).unwrap(),
        tool: tool.to_owned(),
        paths: Vec::new(),
        hosts: Vec::new(),
        mode: Mode::Auto,
        max_taint: DataClass::Secret,
        expires: None,
        result_class: DataClass::Private,
        untrusted: false,
    }
}

pub trait GrantExt {
    fn paths(self, paths: &[&str]) -> Grant;
    fn hosts(self, hosts: &[&str]) -> Grant;
    fn mode(self, mode: Mode) -> Grant;
    fn max_taint(self, class: DataClass) -> Grant;
    fn expires(self, at: i64) -> Grant;
    fn result_class(self, class: DataClass) -> Grant;
    fn untrusted(self) -> Grant;
}

impl GrantExt for Grant {
    fn paths(mut self, paths: &[&str]) -> Grant {
        self.paths = paths.iter().map(|p| p.to_string()).collect();
        self
    }
    fn hosts(mut self, hosts: &[&str]) -> Grant {
        self.hosts = hosts.iter().map(|h| h.to_string()).collect();
        self
    }
    fn mode(mut self, mode: Mode) -> Grant {
        self.mode = mode;
        self
    }
    fn max_taint(mut self, class: DataClass) -> Grant {
        self.max_taint = class;
        self
    }
    fn expires(mut self, at: i64) -> Grant {
        self.expires = Some(Timestamp::from_micros(at));
        self
    }
    fn result_class(mut self, class: DataClass) -> Grant {
        self.result_class = class;
        self
    }
    fn untrusted(mut self) -> Grant {
        self.untrusted = true;
        self
    }
}

pub fn set(grants: impl IntoIterator<Item = Grant>) -> ToolGrants {
    ToolGrants::new(grants).unwrap()
}

pub fn request(tool: &str, arguments: &str) -> ToolRequest {
    ToolRequest {
        session: SessionId::parse("run-1").unwrap(),
        call: CallId(1),
        tool: tool.to_owned(),
        arguments: arguments.to_owned(),
    }
}

pub fn read(path: &str) -> ToolRequest {
    request("read_file", &format!(r#"{{"path":{path:?}}}"#))
}

pub fn write(path: &str) -> ToolRequest {
    request(
        "write_file",
        &format!(r#"{{"path":{path:?},"content":"x"}}"#),
    )
}

pub fn fetch(url: &str) -> ToolRequest {
    request("http_fetch", &format!(r#"{{"url":{url:?}}}"#))
}

pub fn at(micros: i64) -> Timestamp {
    Timestamp::from_micros(micros)
}
