//! A one-line progress bar for the long commands (`simulate`, `bench`): drawn on stderr only when
//! stderr is a terminal, so piped and redirected runs (CI logs, `2> file`) stay clean.

use std::io::{IsTerminal, Write};

/// Redraws one line with `\r`, only when the shown percentage changes.
pub struct Progress<W: Write> {
    label: String,
    /// `None`: quiet (not a terminal).
    out: Option<W>,
    shown: Option<usize>,
}

const WIDTH: usize = 30;
const LABEL: usize = 28;

impl Progress<std::io::Stderr> {
    /// On stderr, if stderr is a terminal.
    pub fn stderr(label: impl Into<String>) -> Self {
        let stderr = std::io::stderr();
        Progress::new(label, shown(stderr.is_terminal()).then_some(stderr))
    }
}

/// Whether to draw progress: on a terminal only (a person is watching; a pipe or a file would
/// collect every redraw).
pub fn shown(stderr_is_terminal: bool) -> bool {
    stderr_is_terminal
}

impl<W: Write> Progress<W> {
    pub fn new(label: impl Into<String>, out: Option<W>) -> Self {
        Progress { label: label.into(), out, shown: None }
    }

    /// Names what is in progress now (the bar is redrawn at the next update).
    pub fn relabel(&mut self, label: impl Into<String>) {
        self.label = label.into();
        self.shown = None;
    }

    /// Shows `fraction` (0 to 1) done.
    pub fn update(&mut self, fraction: f64) {
        let Some(out) = self.out.as_mut() else { return };
        let percent = (fraction.clamp(0.0, 1.0) * 100.0) as usize;
        if self.shown == Some(percent) {
            return;
        }
        self.shown = Some(percent);
        let filled = percent * WIDTH / 100;
        let label: String = self.label.chars().take(LABEL).collect();
        let _ = write!(out, "\r{label:<LABEL$} [{}{}] {percent:3}%", "#".repeat(filled), ".".repeat(WIDTH - filled));
        let _ = out.flush();
    }

    /// Erases the line (before other output, and at the end).
    pub fn clear(&mut self) {
        if let (Some(out), Some(_)) = (self.out.as_mut(), self.shown) {
            let _ = write!(out, "\r{}\r", " ".repeat(LABEL + WIDTH + 8));
            let _ = out.flush();
        }
        self.shown = None;
    }

    #[cfg(test)]
    fn into_inner(self) -> Option<W> {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_only_on_a_terminal() {
        assert!(shown(true));
        assert!(!shown(false));
    }

    #[test]
    fn a_terminal_sees_each_change_once_then_a_cleared_line() {
        let mut bar = Progress::new("dovetail", Some(Vec::new()));
        bar.update(0.0);
        bar.update(0.001);
        bar.update(0.5);
        bar.update(2.0);
        bar.clear();
        let out = String::from_utf8(bar.into_inner().unwrap()).unwrap();
        let frames: Vec<&str> = out.split('\r').filter(|f| !f.is_empty()).collect();
        assert_eq!(frames.len(), 4, "{out:?}");
        assert!(frames[0].starts_with("dovetail") && frames[0].ends_with("[..............................]   0%"));
        assert!(frames[1].ends_with("[###############...............]  50%"), "{}", frames[1]);
        assert!(frames[2].ends_with("[##############################] 100%"), "{}", frames[2]);
        assert!(frames[3].trim().is_empty(), "cleared: {:?}", frames[3]);
    }

    #[test]
    fn quiet_when_not_a_terminal() {
        let mut bar: Progress<Vec<u8>> = Progress::new("dovetail", None);
        bar.update(0.5);
        bar.clear();
        assert!(bar.into_inner().is_none());
    }
}
