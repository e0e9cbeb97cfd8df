//! Bounds on the sizes and counts a user can type, checked before anything is allocated.
//!
//! A count that is too large must give a clear error, never an allocation abort
//! (`memory allocation of ... bytes failed`), a machine that swaps until it gives up, or a
//! program that spawns a hundred thousand threads. So:
//!
//! * memory: [`check_memory`] compares an *estimate* of what a synthetic graph
//!   ([`csbm_bytes`]) or a training run ([`training_bytes`]) needs with the memory the machine
//!   has available (`MemAvailable` in `/proc/meminfo` on Linux, read by [`available_memory`]) and
//!   refuses with both numbers in the message;
//! * threads: [`check_threads`] allows 1 to [`max_threads`] (a generous multiple of the cores);
//! * repeat counts (epochs, warm-up runs, steps, requests): [`check_count`] allows 1 (or 0 where
//!   zero makes sense) to [`MAX_COUNT`].
//!
//! ```
//! use workbook::limits::{check_count, check_memory, check_threads, MAX_COUNT};
//! assert!(check_threads("--threads", 0).is_err());
//! assert!(check_threads("--threads", 100_000).is_err());
//! assert!(check_count("--epochs", 1, 1).is_ok());
//! assert!(check_count("--epochs", MAX_COUNT + 1, 1).is_err());
//! let err = check_memory("csbm:1000000000000", u64::MAX).unwrap_err().to_string();
//! assert!(err.contains("needs about"));
//! ```

use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::model::ModelConfig;

/// The largest repeat count (epochs, warm-up runs, steps, requests) accepted: a million runs of
/// anything is already hours; more is a typo.
pub const MAX_COUNT: usize = 1_000_000;

/// Node ids are `u32` inside the library; graphs are limited to this many nodes.
pub const MAX_NODES: usize = u32::MAX as usize;

/// What is assumed available when the machine does not say (no `/proc/meminfo`).
pub const FALLBACK_AVAILABLE: u64 = 8 << 30;

/// The most threads a thread count may ask for: 4 per core, at least 256.
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_mul(4).max(256)
}

/// Checks a thread count given as `what` (e.g. `--threads`).
pub fn check_threads(what: &str, threads: usize) -> Result<()> {
    let max = max_threads();
    if threads == 0 || threads > max {
        return Err(WorkbookError::InvalidConfig(format!(
            "{what} = {threads}: use at least 1 thread and at most {max} (4 per core on this machine, and at least 256)"
        )));
    }
    Ok(())
}

/// Checks a repeat count given as `what` (e.g. `--epochs`): from `min` to [`MAX_COUNT`].
pub fn check_count(what: &str, count: usize, min: usize) -> Result<()> {
    if count < min || count > MAX_COUNT {
        return Err(WorkbookError::InvalidConfig(format!(
            "{what} = {count}: must be between {min} and {MAX_COUNT}"
        )));
    }
    Ok(())
}

/// Bytes of memory available to a new allocation, as the kernel estimates it (`MemAvailable`
/// in `/proc/meminfo`), or `None` where that file does not exist or cannot be parsed.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

/// `MemAvailable: 23216132 kB` → bytes.
fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut parts = line["MemAvailable:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    let unit = match parts.next() {
        Some("kB") | Some("KB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    value.checked_mul(unit)
}

/// A byte count for people: `1.5 GB`, `640.0 MB`, `56.0 TB` (powers of 1024).
pub fn format_bytes(bytes: u64) -> String {
    let units = ["bytes", "KB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = bytes as f64;
    let mut k = 0;
    while v >= 1024.0 && k + 1 < units.len() {
        v /= 1024.0;
        k += 1;
    }
    if k == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", units[k])
    }
}

/// Refuses `what` when its estimated need (`estimate`, bytes) exceeds the memory available
/// now; the error names both.
pub fn check_memory(what: &str, estimate: u64) -> Result<()> {
    let (available, source) = match available_memory() {
        Some(a) => (a, "MemAvailable in /proc/meminfo"),
        None => (
            FALLBACK_AVAILABLE,
            "assumed: this system does not report its available memory",
        ),
    };
    if estimate > available {
        return Err(WorkbookError::InvalidConfig(format!(
            "{what} needs about {} of memory but this machine has {} available ({source}); use a smaller size",
            format_bytes(estimate),
            format_bytes(available)
        )));
    }
    Ok(())
}

/// Estimated peak bytes to generate a csbm graph of `nodes` nodes, `features` features and
/// about `avg_degree` edges per node (its pair list, edge lists, edge index, features, labels
/// and split). Saturates instead of overflowing.
pub fn csbm_bytes(nodes: usize, features: usize, avg_degree: f64) -> u64 {
    let n = nodes as f64;
    let edges = n * avg_degree.max(0.0) + n;
    // pairs (8 per edge), src/dst as i64 (16), the edge index on the host and as tensors (16),
    // sorting and copies (16); features (4 per value, once as a Vec moved into the tensor);
    // per-node bookkeeping (~96). Measured: `workbook data --dataset csbm:1000000` peaks at
    // 860 MB resident, this estimate says 840 MB.
    let bytes = edges * (8.0 + 16.0 + 16.0 + 16.0) + n * features as f64 * 4.0 + n * 96.0;
    to_u64(bytes)
}

/// Estimated bytes a training run of `config` needs beyond the graph itself, on a graph of
/// `nodes` nodes and `edges` edges: activations, their gradients and dropout masks per node and
/// layer, and per-edge work (self-looped edges, the CSR form, attention scores per head).
/// Calibrated against measurements: GCN training on csbm:300000 peaks at 718 MiB resident in
/// all (graph plus this estimate: 1.0 GiB, on the safe side); GATv2 on a 10⁶-node csbm at
/// 8.5 GiB (README, Performance; graph plus this estimate: 8.0 GiB).
pub fn training_bytes(config: &ModelConfig, nodes: usize, edges: usize) -> u64 {
    let n = nodes as f64;
    let e = edges as f64 + n; // self-loops
    let mut bytes = e * 48.0; // self-looped edge index and CSR (indices, order, weights)
    for layer in &config.layers {
        let spec = layer.spec();
        let (width_in, width_out, heads) = (
            spec.in_channels(),
            spec.heads() * spec.out_channels(),
            spec.heads(),
        );
        // input copy (dropout), linear outputs, aggregated output, gradients: ~5 node tensors
        bytes += 5.0 * 4.0 * n * (width_in + width_out) as f64;
        // per edge and head: scores, activations, softmax, dropout mask, gradients (GATv2);
        // the normalised weights and their copies (GCN)
        bytes += 10.0 * 4.0 * e * heads as f64;
    }
    to_u64(bytes)
}

/// Refuses `what` (a training or timing run) of `config` on `graph` when [`training_bytes`] says
/// it cannot fit; the error names the graph and its size.
pub fn check_training_fits(what: &str, config: &ModelConfig, graph: &Graph) -> Result<()> {
    let (nodes, edges) = (graph.num_nodes(), graph.num_edges());
    check_memory(
        &format!("{what} on {} ({nodes} nodes, {edges} edges)", graph.name),
        training_bytes(config, nodes, edges),
    )
}

fn to_u64(bytes: f64) -> u64 {
    if bytes.is_finite() && bytes < u64::MAX as f64 {
        bytes as u64
    } else {
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_meminfo() {
        let text = "MemTotal:       32000000 kB\nMemFree: 1 kB\nMemAvailable:   23216132 kB\n";
        assert_eq!(parse_meminfo(text), Some(23216132 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: lots\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: 5 parsecs\n"), None);
        if cfg!(target_os = "linux") {
            assert!(available_memory().unwrap() > 0);
        }
    }

    #[test]
    fn formats_bytes() {
        assert_eq!(format_bytes(512), "512 bytes");
        assert_eq!(format_bytes(1536), "1.5 KB");
        assert_eq!(format_bytes(8_000_000_000_000), "7.3 TB");
        assert_eq!(format_bytes(u64::MAX), "16.0 EB");
    }

    #[test]
    fn estimates_grow_and_saturate() {
        assert!(csbm_bytes(1_000, 32, 10.0) < csbm_bytes(1_000_000, 32, 10.0));
        assert_eq!(csbm_bytes(usize::MAX, usize::MAX, f64::INFINITY), u64::MAX);
        let c = ModelConfig::gcn(32, 16, 5);
        assert!(training_bytes(&c, 1_000, 10_000) < training_bytes(&c, 1_000_000, 10_000_000));
        let err = check_memory("a test", u64::MAX).unwrap_err().to_string();
        assert!(err.contains("needs about 16.0 EB"), "{err}");
        assert!(err.contains("available"), "{err}");
        assert!(check_memory("a test", 1).is_ok());
    }

    #[test]
    fn bounds_counts_and_threads() {
        assert!(check_threads("t", 1).is_ok());
        assert!(check_threads("t", max_threads()).is_ok());
        assert!(check_threads("t", max_threads() + 1).is_err());
        assert!(check_threads("t", 0).is_err());
        assert!(check_count("c", 0, 0).is_ok());
        assert!(check_count("c", 0, 1).is_err());
        let err = check_count("--epochs", usize::MAX, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--epochs") && err.contains("1000000"), "{err}");
    }
}
