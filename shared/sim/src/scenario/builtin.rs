//! The scenarios compiled into the binary, selectable by name (`--scenario NAME`). Each recreates
//! a situation from the articles the project started from; see each file's `description`.

/// Names, the default first.
pub const NAMES: [&str; 8] =
    ["default", "batch-from-zero", "eight-pods", "black-friday", "gpu-jobs", "large-cluster", "cost-cap", "savings"];

const TEXTS: [&str; 8] = [
    include_str!("builtin/default.yaml"),
    include_str!("builtin/batch-from-zero.yaml"),
    include_str!("builtin/eight-pods.yaml"),
    include_str!("builtin/black-friday.yaml"),
    include_str!("builtin/gpu-jobs.yaml"),
    include_str!("builtin/large-cluster.yaml"),
    include_str!("builtin/cost-cap.yaml"),
    include_str!("builtin/savings.yaml"),
];

/// The YAML of a built-in scenario.
pub fn get(name: &str) -> Option<&'static str> {
    NAMES.iter().position(|n| *n == name).map(|i| TEXTS[i])
}
