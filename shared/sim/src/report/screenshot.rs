//! The HTML report in a real browser: headless Chromium renders it to a PNG, which a person then
//! looks at (the test prints where). `tests/run-all.sh` installs Debian's `chromium`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::driver::{run, Options, Policy};
use crate::scenario::Scenario;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Renders `html` with headless Chromium at 1280×2000 into `png`.
fn screenshot(html: &Path, png: &Path, profile: &Path) {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: the HTML report test renders the page in headless Chromium \
         (Debian: apt-get install -y chromium; tests/run-all.sh does this)"
    );
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,2000",
            &format!("file://{}", html.display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish the screenshot within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() > 24 && &bytes[..8] == b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

#[test]
fn the_html_report_renders_in_chromium() {
    let scenario = Scenario::builtin("black-friday").unwrap();
    let runs: Vec<_> = [Policy::Dovetail, Policy::ClusterAutoscaler]
        .into_iter()
        .map(|policy| {
            let opts = Options { duration: Some(Duration::from_secs(6 * 3600)), ..Options::new(policy) };
            run(&scenario, opts).unwrap()
        })
        .collect();
    let page = super::html(&runs);
    for external in ["<script", " src=", " href=", "url(", "@import"] {
        assert!(!page.contains(external), "the page must be self-contained, found {external:?}");
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("dovetail-sim-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (html, png) = (dir.join("report.html"), dir.join("report.png"));
    std::fs::write(&html, &page).unwrap();
    screenshot(&html, &png, &dir.join("chromium-profile"));
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    assert_eq!(png_size(&bytes), (1280, 2000));
    // A blank page compresses to a few kilobytes; charts and tables do not.
    assert!(bytes.len() > 60_000, "the screenshot looks empty ({} bytes)", bytes.len());
    eprintln!("HTML report: {}\nscreenshot: {}", html.display(), png.display());
}
