//! A small client of Chromium's DevTools protocol, for the dashboard's test and benchmark: it
//! starts Debian's headless `chromium` with a throwaway profile, opens pages in it, runs
//! JavaScript in them and reads what the browser measured (paint timings, the live page's DOM).
//! Shared by `tests/it/dashboard.rs` and `benches/dashboard.rs`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The `chromium` on `PATH`.
pub fn chromium() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file())
}

/// A headless Chromium driven over its DevTools WebSocket; killed when dropped.
pub struct Browser {
    child: Child,
    socket: Socket,
    next: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `binary` headless and connects to it.
    pub async fn launch(binary: &Path) -> Result<Browser, String> {
        let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut child = Command::new(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (found, url) = std::sync::mpsc::channel();
        // Chromium says where it listens on stderr; the rest of its chatter is drained so the
        // pipe never fills.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if !sent {
                    if let Some(at) = line.find("ws://") {
                        let _ = found.send(line[at..].trim().to_string());
                        sent = true;
                    }
                }
            }
        });
        let url = match url.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                return Err("chromium did not say where its DevTools listen".into());
            }
        };
        let (socket, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|e| format!("cannot reach chromium's DevTools at {url}: {e}"))?;
        Ok(Browser {
            child,
            socket,
            next: 0,
            _profile: profile,
        })
    }

    /// Calls `method` (in the page of `session`, or on the browser) and returns its result.
    pub async fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .await
            .map_err(|e| e.to_string())?;
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(60), self.socket.next())
                .await
                .map_err(|_| format!("{method}: no answer in 60 s"))?
                .ok_or("chromium closed its DevTools")?
                .map_err(|e| e.to_string())?;
            let Message::Text(text) = frame else { continue };
            let answer: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            if answer["id"] != json!(id) {
                continue; // an event
            }
            if let Some(error) = answer.get("error") {
                return Err(format!("{method}: {error}"));
            }
            return Ok(answer["result"].clone());
        }
    }

    /// Opens `url` in a new tab; returns the tab's session.
    pub async fn open(&mut self, url: &str) -> Result<String, String> {
        let target = self
            .call(None, "Target.createTarget", json!({"url": url}))
            .await?;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await?;
        attached["sessionId"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("no session in {attached}"))
    }

    /// The value of `expression` in the tab of `session` (a promise is awaited).
    pub async fn eval(&mut self, session: &str, expression: &str) -> Result<Value, String> {
        let out = self
            .call(
                Some(session),
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(thrown) = out.get("exceptionDetails") {
            return Err(format!("{expression}: {thrown}"));
        }
        Ok(out["result"]["value"].clone())
    }

    /// Waits until `expression` is true in the tab, checking every 10 ms; how long it took, or
    /// an error after `limit`.
    pub async fn wait_for(
        &mut self,
        session: &str,
        expression: &str,
        limit: Duration,
    ) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            if self.eval(session, expression).await? == json!(true) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > limit {
                return Err(format!("not true after {limit:?}: {expression}"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Closes the tab of `session`.
    pub async fn close(&mut self, session: &str) -> Result<(), String> {
        self.call(Some(session), "Page.close", json!({}))
            .await
            .map(|_| ())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
