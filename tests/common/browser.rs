//! A real browser for the console's tests: Debian's Chromium, headless,
//! driven over WebDriver by its `chromedriver`, which each browser starts
//! on a free loopback port with a fresh profile.
//!
//! Without `chromium` and `chromedriver` the tests are skipped as every
//! test that needs a tool is ([`super::Tool::Browser`]: one line naming
//! Debian's packages, a failure under `LIGHTNING_STORE_TESTS_NO_SKIP=1`).
//! A test that fails saves a screenshot of the page
//! under `target/console-screenshots/`. With
//! `LIGHTNING_STORE_CONSOLE_SCREENSHOTS=<dir>` the tests that show each
//! page save it there (the README's pictures).

use std::future::Future;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// The directory the page screenshots are written to, when set.
pub const SCREENSHOTS_ENV: &str = "LIGHTNING_STORE_CONSOLE_SCREENSHOTS";

/// The longest wait for a page to show something.
const PATIENCE: Duration = Duration::from_secs(15);

/// The window of the tests, and of the README's screenshots.
pub const DESKTOP: (u32, u32) = (1280, 800);

/// A phone's width (and height).
pub const PHONE: (u32, u32) = (390, 844);

/// A headless Chromium under WebDriver.
pub struct Browser {
    client: Client,
    driver: parking_lot::Mutex<Option<Child>>,
    _profile: tempfile::TempDir,
    /// The test's name, for the screenshot of a failure.
    name: String,
}

/// Returns the paths of Chromium and chromedriver, when both are on `PATH`.
pub fn programs() -> Option<(PathBuf, PathBuf)> {
    Some((
        program("chromium").or_else(|| program("chromium-browser"))?,
        program("chromedriver")?,
    ))
}

/// Returns the path of a program on `PATH`, if any.
fn program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    })
}

/// Runs `body` with a fresh browser; when it panics, saves a screenshot of
/// the page first. Without a browser, the test is skipped
/// ([`super::available`]: it returns, or fails where no skip is allowed).
pub async fn with_browser<F, Fut>(name: &str, body: F)
where
    F: FnOnce(Arc<Browser>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    if !super::available(super::Tool::Browser) {
        return;
    }
    let browser = Browser::start(name).await;
    let browser = Arc::new(browser);
    let outcome = tokio::spawn(body(browser.clone())).await;
    if let Err(error) = outcome {
        let path = browser.save_failure().await;
        eprintln!("{name}: the page at the failure is {}", path.display());
        browser.close().await;
        std::panic::resume_unwind(error.into_panic());
    }
    browser.close().await;
}

impl Browser {
    /// Starts chromedriver and a browser session (Chromium is there: see
    /// [`with_browser`]).
    async fn start(name: &str) -> Self {
        let (chromium, chromedriver) = programs().expect("chromium and chromedriver on PATH");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        // It says so on its standard output once it listens.
        let stdout = driver.stdout.take().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("started successfully") {
                    let _ = ready_tx.send(());
                }
            }
        });
        ready_rx
            .recv_timeout(PATIENCE)
            .expect("chromedriver did not start");
        let profile = tempfile::Builder::new()
            .prefix("lightning-store-chromium-")
            .tempdir()
            .unwrap();
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    "--hide-scrollbars",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--window-size={},{}", DESKTOP.0, DESKTOP.1),
                ],
            }
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a browser session");
        Self {
            client,
            driver: parking_lot::Mutex::new(Some(driver)),
            _profile: profile,
            name: name.to_owned(),
        }
    }

    /// Returns the WebDriver client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Opens a URL and waits until its page is loaded. WebDriver's own
    /// wait is not enough: under load, Chromium's first navigation of a
    /// session was seen answered while the blank document still showed, so
    /// the document shown before is marked and a new one awaited.
    pub async fn goto(&self, url: &str) {
        let mark = self.mark_document().await;
        self.client.goto(url).await.expect("the page loads");
        self.wait_for_new_document(mark).await;
    }

    /// Returns the page's URL.
    pub async fn url(&self) -> String {
        self.client.current_url().await.unwrap().to_string()
    }

    /// Returns the text of the first element `css` selects.
    pub async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|_| panic!("no element {css}"))
            .text()
            .await
            .unwrap()
    }

    /// Returns the texts of every element `css` selects.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let mut texts = Vec::new();
        for element in self.client.find_all(Locator::Css(css)).await.unwrap() {
            texts.push(element.text().await.unwrap());
        }
        texts
    }

    /// Runs a script in the page and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, Vec::new()).await.unwrap()
    }

    /// Waits until an element `css` selects holds `needle` in its text: a
    /// MutationObserver in the page reports the change (no polling),
    /// within [`PATIENCE`].
    pub async fn wait_for_text(&self, css: &str, needle: &str) {
        const SCRIPT: &str = r#"
            const [css, needle, patience, done] = arguments;
            const found = () => Array.from(document.querySelectorAll(css))
                .some((element) => element.textContent.includes(needle));
            if (found()) { done(true); return; }
            const observer = new MutationObserver(() => {
                if (found()) { observer.disconnect(); done(true); }
            });
            observer.observe(document.documentElement, { subtree: true, childList: true, characterData: true });
            setTimeout(() => { observer.disconnect(); done(found()); }, patience);
        "#;
        let patience = PATIENCE.as_millis() as u64;
        let found = self
            .client
            .execute_async(SCRIPT, vec![json!(css), json!(needle), json!(patience)])
            .await
            .unwrap();
        assert_eq!(
            found,
            json!(true),
            "no {css} showed {needle:?} within {PATIENCE:?}"
        );
    }

    /// Clicks the first element `css` selects and waits for the page the
    /// click loads.
    pub async fn click_to_load(&self, css: &str) {
        let mark = self.mark_document().await;
        self.click(css).await;
        self.wait_for_new_document(mark).await;
    }

    /// Marks the document shown, for [`Browser::wait_for_new_document`].
    pub async fn mark_document(&self) -> Value {
        self.eval("window.consoleTestDocument = Math.random(); return window.consoleTestDocument")
            .await
    }

    /// Waits until the browser shows a new document (whatever its URL),
    /// loaded: a navigation sends no event out of the browser, so the new
    /// document is asked for until it answers, within [`PATIENCE`].
    pub async fn wait_for_new_document(&self, mark: Value) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let state = self
                .client
                .execute(
                    "return [window.consoleTestDocument || null, document.readyState]",
                    Vec::new(),
                )
                .await;
            if let Ok(state) = state
                && state[0] != mark
                && state[1] == "complete"
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no new page within {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the first element `css` selects (a click that loads no page).
    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|_| panic!("no element {css}"))
            .click()
            .await
            .unwrap();
    }

    /// Types into the field `css` selects.
    pub async fn type_into(&self, css: &str, text: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|_| panic!("no field {css}"))
            .send_keys(text)
            .await
            .unwrap();
    }

    /// Resizes the window's content area to `size`.
    pub async fn resize(&self, (width, height): (u32, u32)) {
        self.client.set_window_size(width, height).await.unwrap();
    }

    /// Saves the page as `<name>.png` in the screenshots directory, when
    /// [`SCREENSHOTS_ENV`] names one.
    pub async fn document(&self, name: &str) {
        if let Some(dir) = std::env::var_os(SCREENSHOTS_ENV) {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            self.save(&dir.join(format!("{name}.png"))).await;
        }
    }

    async fn save(&self, path: &Path) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Saves the page of a failure under `target/console-screenshots/`.
    async fn save_failure(&self) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.png", self.name.replace("::", "-")));
        if let Ok(png) = self.client.screenshot().await {
            let _ = std::fs::write(&path, png);
        }
        path
    }

    /// Ends the session and stops chromedriver.
    async fn close(&self) {
        let _ = self.client.clone().close().await;
        if let Some(mut driver) = self.driver.lock().take() {
            let _ = driver.kill();
            let _ = driver.wait();
        }
    }
}

/// A test that fails leaves no driver behind.
impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(mut driver) = self.driver.get_mut().take() {
            let _ = driver.kill();
            let _ = driver.wait();
        }
    }
}
