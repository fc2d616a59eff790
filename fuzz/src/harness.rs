//! Runs one target: its seeds, then generated cases, each under the bounds.
//!
//! A generated case is random bytes (up to [`MAX_BYTES`]) read by `arbitrary` as a [`Case`], as
//! cargo-fuzz reads libFuzzer's. Under `cargo test` a target generates cases for one second
//! (what CI runs: the seeds plus that second); `DOVETAIL_FUZZ_CASES=N` runs N cases instead,
//! which is the soak (`docs/development.md`, "Fuzzing"). Case `i` of a run is a function of the
//! run's seed and `i`, so a failure prints `DOVETAIL_FUZZ_SEED=… DOVETAIL_FUZZ_CASE=…`, which
//! replays that case alone, and the rendered text, which is what to add to the corpus.
//!
//! Bounds, per case: the text is at most [`crate::tree::MAX_TEXT`] bytes; the heap the parser
//! holds above what was live before may not pass [`case_memory_limit`]; a case still running
//! after [`case_time_limit`] aborts the process, naming the target and printing the input (a
//! hang cannot be caught otherwise).

use std::fmt::Debug;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::memory;
use crate::tree::{cut, Mutation};

/// One target.
pub struct Target<I> {
    /// Its name: the test's and the corpus directory's, `fuzz/corpus/<name>/`.
    pub name: &'static str,
    /// Directories (from the workspace root) whose files are seeds too: the project's own
    /// fixtures, read where they are.
    pub fixtures: &'static [&'static str],
    /// Field names and values the generators and mutations draw words from.
    pub vocabulary: &'static [&'static str],
    /// The structure-aware generator: a generated value as the parser's text.
    pub render: fn(&I, &[&str]) -> String,
    /// The oracle: parses the text and panics if the parser broke a promise.
    pub check: fn(&str),
}

/// A generated case.
#[derive(Debug, Arbitrary)]
pub enum Case<I> {
    Structured(I),
    Text(String),
    Mutated(Mutation),
}

/// The most random bytes one generated case is read from.
pub const MAX_BYTES: usize = 4096;

/// Where the corpus and the fixtures are.
fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("fuzz/ is in the workspace")
}

/// The seeds of a target: its corpus files, then its fixtures' files, each directory in name
/// order (not recursive), as `(path, text)`.
pub fn seeds<I>(target: &Target<I>) -> Vec<(PathBuf, String)> {
    let corpus = format!("fuzz/corpus/{}", target.name);
    let mut out = Vec::new();
    for dir in std::iter::once(corpus.as_str()).chain(target.fixtures.iter().copied()) {
        let dir = workspace().join(dir);
        // The corpus directory exists once a target has inputs of its own; fixtures must.
        if dir.ends_with(target.name) && !dir.exists() {
            continue;
        }
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut files: Vec<PathBuf> =
            entries.map(|e| e.expect("a directory entry").path()).filter(|p| p.is_file()).collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            out.push((file, text));
        }
    }
    out
}

/// How much heap one case may hold at once: `DOVETAIL_FUZZ_CASE_MIB`, 64 MiB unless set. A
/// parser given a few kilobytes has no reason to come near it.
pub fn case_memory_limit() -> usize {
    std::env::var("DOVETAIL_FUZZ_CASE_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(64) << 20
}

/// How long one case may run before the watchdog aborts: `DOVETAIL_FUZZ_CASE_SECONDS`, 10 s
/// unless set (debug builds, a busy machine).
pub fn case_time_limit() -> Duration {
    Duration::from_secs(std::env::var("DOVETAIL_FUZZ_CASE_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10))
}

/// What each thread is running now, for the watchdog.
struct Running {
    thread: ThreadId,
    target: &'static str,
    since: Instant,
    input: String,
}

static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());

fn watchdog() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let limit = case_time_limit();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hung) = running.iter().find(|r| r.since.elapsed() > limit) {
                eprintln!(
                    "fuzz {}: a case ran longer than {limit:?} (a hang); its input:\n{:?}",
                    hung.target, hung.input
                );
                std::process::abort();
            }
        });
    });
}

/// Figures of one run, printed at its end.
#[derive(Default)]
struct Tally {
    cases: u64,
    peak: usize,
    slowest: Duration,
}

/// Runs one case: the oracle under the bounds. Panics (so the test fails) when the parser
/// panicked, the oracle found a broken promise, or the case held too much memory.
fn case<I>(target: &Target<I>, text: &str, tally: &mut Tally) {
    let thread = std::thread::current().id();
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push(Running {
        thread,
        target: target.name,
        since: Instant::now(),
        input: text.to_string(),
    });
    let started = Instant::now();
    let base = memory::start();
    let outcome = catch_unwind(AssertUnwindSafe(|| (target.check)(text)));
    let peak = memory::peak_since(base);
    let took = started.elapsed();
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).retain(|r| r.thread != thread);
    if let Err(panic) = outcome {
        eprintln!(
            "fuzz {}: this input failed (add it to fuzz/corpus/{} once fixed):\n{text:?}",
            target.name, target.name
        );
        resume_unwind(panic);
    }
    let limit = case_memory_limit();
    assert!(
        peak <= limit,
        "fuzz {}: the case held {} MiB at once (limit {} MiB); its input:\n{text:?}",
        target.name,
        peak >> 20,
        limit >> 20
    );
    tally.cases += 1;
    tally.peak = tally.peak.max(peak);
    tally.slowest = tally.slowest.max(took);
}

/// Replays the target's seeds, then runs generated cases (see the module documentation).
pub fn run<I>(target: &Target<I>)
where
    I: for<'a> Arbitrary<'a> + Debug + 'static,
{
    watchdog();
    let seeds = seeds(target);
    assert!(
        !seeds.is_empty(),
        "fuzz {}: no seeds in fuzz/corpus/{} or {:?}",
        target.name,
        target.name,
        target.fixtures
    );
    let started = Instant::now();
    let mut tally = Tally::default();
    // The first seed once unmeasured: lazily built tables (the embedded catalog) are not the case's.
    let _ = catch_unwind(AssertUnwindSafe(|| (target.check)(&seeds[0].1)));
    for (path, text) in &seeds {
        eprintln!("fuzz {}: seed {}", target.name, path.strip_prefix(workspace()).unwrap_or(path).display());
        case(target, text, &mut tally);
    }
    let seed_count = tally.cases;
    let texts: Vec<String> = seeds.into_iter().map(|(_, text)| text).collect();
    let (run_seed, cases, replay) = generation();
    let mut bytes = Vec::with_capacity(MAX_BYTES);
    let generating = Instant::now();
    for index in replay.map_or(0..cases, |i| i..i + 1) {
        if replay.is_none() && cases == u64::MAX && generating.elapsed() > Duration::from_secs(1) {
            break;
        }
        // Each case's bytes from its own generator, so that one case replays alone.
        let mut rng = SmallRng::seed_from_u64(run_seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        bytes.resize(rng.next_u32() as usize % (MAX_BYTES + 1), 0);
        rng.fill_bytes(&mut bytes);
        let Ok(generated) = Case::<I>::arbitrary_take_rest(Unstructured::new(&bytes)) else { continue };
        let text = match &generated {
            Case::Structured(input) => cut((target.render)(input, target.vocabulary)),
            Case::Text(text) => text.clone(),
            Case::Mutated(mutation) => mutation.render(&texts, target.vocabulary),
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| case(target, &text, &mut tally)));
        if let Err(panic) = outcome {
            eprintln!("fuzz {}: replay with DOVETAIL_FUZZ_SEED={run_seed} DOVETAIL_FUZZ_CASE={index}", target.name);
            resume_unwind(panic);
        }
    }
    eprintln!(
        "fuzz {}: {seed_count} seeds and {} generated cases (DOVETAIL_FUZZ_SEED={run_seed}) in {:.1} s; the largest case held {:.1} MiB, the slowest took {} ms",
        target.name,
        tally.cases - seed_count,
        started.elapsed().as_secs_f64(),
        tally.peak as f64 / f64::from(1 << 20),
        tally.slowest.as_millis()
    );
}

/// The run's seed (`DOVETAIL_FUZZ_SEED`, else from the clock), how many cases
/// (`DOVETAIL_FUZZ_CASES`, else as many as one second allows: `u64::MAX`), and the one case to
/// replay (`DOVETAIL_FUZZ_CASE`).
fn generation() -> (u64, u64, Option<u64>) {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    (
        var("DOVETAIL_FUZZ_SEED").unwrap_or(clock),
        var("DOVETAIL_FUZZ_CASES").unwrap_or(u64::MAX),
        var("DOVETAIL_FUZZ_CASE"),
    )
}
