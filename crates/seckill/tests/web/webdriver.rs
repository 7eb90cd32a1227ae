//! Just enough of the W3C WebDriver protocol (JSON over HTTP) to drive
//! Debian's Chromium through chromedriver: start a session, open a page,
//! find elements, type, click, read text.
//!
//! Hand-written over `reqwest` (already a dependency) rather than a WebDriver
//! crate: eight endpoints, no TLS stack, no extra dependency tree.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The W3C name of an element reference in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver child process on a free port; killed on drop.
pub struct Driver {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Driver {
    /// Starts `chromedriver` and waits until it reports ready.
    pub async fn start(chromedriver: &Path) -> Result<Driver, Error> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", chromedriver.display()))?;
        let driver = Driver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(60))
                .build()?,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = async {
                let status: Value = driver
                    .http
                    .get(format!("{}/status", driver.base))
                    .send()
                    .await?
                    .json()
                    .await?;
                Ok::<_, reqwest::Error>(status["value"]["ready"].as_bool() == Some(true))
            }
            .await;
            if matches!(ready, Ok(true)) {
                return Ok(driver);
            }
            if Instant::now() > deadline {
                return Err("chromedriver did not become ready within 20 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A headless browser session of `chromium`, with a profile in `profile`.
    pub async fn session(&self, chromium: &Path, profile: &Path) -> Result<Session, Error> {
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        let capabilities = json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": { "binary": chromium.display().to_string(), "args": args },
            }}
        });
        let value = call(
            &self.http,
            reqwest::Method::POST,
            &format!("{}/session", self.base),
            Some(capabilities),
        )
        .await?;
        let id = value["sessionId"]
            .as_str()
            .ok_or_else(|| format!("no sessionId in {value}"))?;
        Ok(Session {
            http: self.http.clone(),
            url: format!("{}/session/{id}", self.base),
        })
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser; [`Session::quit`] closes it.
pub struct Session {
    http: reqwest::Client,
    url: String,
}

/// A reference to an element of the current page.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Session {
    pub async fn goto(&self, url: &str) -> Result<(), Error> {
        self.post("/url", json!({ "url": url })).await.map(drop)
    }

    /// The element matching a CSS selector.
    pub async fn find(&self, css: &str) -> Result<Element, Error> {
        let value = self
            .post("/element", json!({ "using": "css selector", "value": css }))
            .await?;
        let id = value[ELEMENT_KEY]
            .as_str()
            .ok_or_else(|| format!("no element reference for {css:?} in {value}"))?;
        Ok(Element(id.to_owned()))
    }

    pub async fn clear(&self, element: &Element) -> Result<(), Error> {
        self.post(&format!("/element/{}/clear", element.0), json!({}))
            .await
            .map(drop)
    }

    pub async fn type_text(&self, element: &Element, text: &str) -> Result<(), Error> {
        self.post(
            &format!("/element/{}/value", element.0),
            json!({ "text": text }),
        )
        .await
        .map(drop)
    }

    pub async fn click(&self, element: &Element) -> Result<(), Error> {
        self.post(&format!("/element/{}/click", element.0), json!({}))
            .await
            .map(drop)
    }

    /// The rendered text of the element matching `css`.
    pub async fn text(&self, css: &str) -> Result<String, Error> {
        let element = self.find(css).await?;
        let value = call(
            &self.http,
            reqwest::Method::GET,
            &format!("{}/element/{}/text", self.url, element.0),
            None,
        )
        .await?;
        Ok(value.as_str().unwrap_or_default().to_owned())
    }

    /// Polls the text of `css` until `wanted` accepts it; errors with the
    /// last text seen after `timeout`.
    pub async fn wait_for_text(
        &self,
        css: &str,
        timeout: Duration,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<String, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text(css).await?;
            if wanted(&text) {
                return Ok(text);
            }
            if Instant::now() > deadline {
                return Err(format!("{css} still shows {text:?} after {timeout:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Resizes the browser window (headless: the viewport) to `width` x
    /// `height` CSS pixels.
    pub async fn set_window_size(&self, width: u32, height: u32) -> Result<(), Error> {
        self.post("/window/rect", json!({ "width": width, "height": height }))
            .await
            .map(drop)
    }

    /// Runs `script` (a function body) in the page; what it returns.
    pub async fn execute(&self, script: &str) -> Result<Value, Error> {
        self.post("/execute/sync", json!({ "script": script, "args": [] }))
            .await
    }

    /// Ends the session and closes the browser.
    pub async fn quit(self) -> Result<(), Error> {
        call(&self.http, reqwest::Method::DELETE, &self.url, None)
            .await
            .map(drop)
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, Error> {
        call(
            &self.http,
            reqwest::Method::POST,
            &format!("{}{path}", self.url),
            Some(body),
        )
        .await
    }
}

/// One WebDriver command: returns the answer's `value`, or its error.
async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, Error> {
    let mut request = http.request(method.clone(), url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await?;
    let status = response.status();
    let answer: Value = response.json().await?;
    if !status.is_success() {
        let error = &answer["value"];
        return Err(format!(
            "WebDriver {method} {url}: {status} {} {}",
            error["error"], error["message"]
        )
        .into());
    }
    Ok(answer["value"].clone())
}
