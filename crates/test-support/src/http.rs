//! A loopback HTTP client for tests that serve the App on 127.0.0.1: requests by path, with any
//! headers, and each answer's status, content type, length and body as the server sent them.

use std::net::SocketAddr;

/// A server's loopback address and one connection pool to it.
#[derive(Clone)]
pub struct Loopback {
    /// `http://127.0.0.1:<port>`, no trailing slash.
    pub base: String,
    pub client: reqwest::Client,
}

/// One response, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// Empty when the response has none.
    pub content_type: String,
    pub content_length: Option<String>,
    pub body: String,
}

impl Answer {
    /// The body as JSON; a body that is not JSON stops the test, showing it.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// A response built by hand (a cookie, a redirect), read whole.
    pub async fn read(resp: reqwest::Response) -> Answer {
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let (content_type, content_length) = (
            header("content-type").unwrap_or_default(),
            header("content-length"),
        );
        Answer {
            status: resp.status().as_u16(),
            content_type,
            content_length,
            body: resp.text().await.unwrap(),
        }
    }
}

impl Loopback {
    /// A client that follows no redirect: a test sees what the server sent.
    pub fn new(addr: SocketAddr) -> Self {
        Loopback {
            base: format!("http://{addr}"),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    /// The absolute URL of `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut req = self.client.get(self.url(path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        Answer::read(req.send().await.unwrap()).await
    }

    pub async fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Answer {
        let mut req = self.client.post(self.url(path)).body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        Answer::read(req.send().await.unwrap()).await
    }
}
