//! Bounds on the sizes and counts a user can type, checked before anything is allocated.
//!
//! A count that is too large must give a clear error, never an allocation abort
//! (`memory allocation of ... bytes failed`), a machine that swaps until it gives up, or a
//! program that spawns a hundred thousand threads. So:
//!
//! * memory: one estimator for every command. [`check_memory`] compares an *estimate* with the
//!   memory limit ([`memory_limit`]): the memory the machine has available (`MemAvailable` in
//!   `/proc/meminfo` on Linux, read by [`available_memory`]) unless [`set_memory_limit`] (the
//!   CLI's `--max-memory`) says otherwise, and refuses with both numbers in the message. The
//!   estimates: a synthetic graph ([`csbm_bytes`]), a training run ([`training_bytes`]), a
//!   forward pass ([`inference_bytes`], which `predict`, `export` and serving use), concurrent
//!   serving ([`serving_bytes`]), mini-batch training ([`minibatch_bytes`], with the batch
//!   size and neighbours per hop bounded by [`batch_bound`]) and loading a file
//!   ([`LOAD_FACTOR`] times its size, see [`crate::input_file`]);
//! * threads: [`check_threads`] allows 1 to [`max_threads`] (a generous multiple of the cores);
//! * repeat counts (epochs, warm-up runs, steps, requests): [`check_count`] allows 1 (or 0 where
//!   zero makes sense) to [`MAX_COUNT`].
//!
//! ```
//! use workbook::limits::{check_count, check_memory, check_threads, parse_bytes, MAX_COUNT};
//! assert!(check_threads("--threads", 0).is_err());
//! assert!(check_threads("--threads", 100_000).is_err());
//! assert!(check_count("--epochs", 1, 1).is_ok());
//! assert!(check_count("--epochs", MAX_COUNT + 1, 1).is_err());
//! let err = check_memory("csbm:1000000000000", u64::MAX).unwrap_err().to_string();
//! assert!(err.contains("needs about") && err.contains("--max-memory"));
//! assert_eq!(parse_bytes("1.5G").unwrap(), 3 << 29);
//! ```

use crate::error::{Result, WorkbookError};
use std::sync::atomic::{AtomicU64, Ordering};

/// One layer as the estimates see it: its widths and heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerSize {
    /// PyG's class name (`GCNConv`), for messages.
    pub kind: &'static str,
    pub in_channels: usize,
    /// Channels per head.
    pub out_channels: usize,
    pub heads: usize,
    /// Width of the layer's output (heads × channels, or channels when heads are averaged).
    pub output_width: usize,
    /// Whether the layer returns attention weights (kept per response when serving).
    pub attention: bool,
}

/// What the memory estimates read from a model: each layer's sizes and the parameter count.
/// Implemented by [`ModelConfig`](crate::ModelConfig); the estimates sit at the bottom of the
/// crate and see a model only through this.
pub trait ModelSize {
    /// One entry per layer, first to last.
    fn layer_sizes(&self) -> Vec<LayerSize>;
    /// Parameter elements, all layers together.
    fn parameter_elements(&self) -> f64;
}

/// What the estimates read from a graph; implemented by [`Graph`](crate::Graph).
pub trait GraphSize {
    /// The graph's name, for messages.
    fn label(&self) -> &str;
    fn node_count(&self) -> usize;
    fn edge_count(&self) -> usize;
}

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

/// The memory limit set by [`set_memory_limit`]; 0: none (the available memory is the limit).
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// Sets the limit every memory estimate is checked against, for the whole process (like a
/// `ulimit`): `Some(bytes)` replaces the available memory (the CLI's `--max-memory`: raise it
/// where swap is wanted or an estimate is on the safe side, lower it to keep a run small);
/// `None` goes back to the memory available at each check.
pub fn set_memory_limit(bytes: Option<u64>) {
    LIMIT.store(bytes.unwrap_or(0), Ordering::Relaxed);
}

/// The memory limit now, and where it comes from (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    /// `set with --max-memory`, `the memory this machine has available (MemAvailable in
    /// /proc/meminfo)`, or the assumption made where the system does not say.
    pub source: String,
}

/// The limit [`check_memory`] applies: [`set_memory_limit`]'s, else [`available_memory`], else
/// [`FALLBACK_AVAILABLE`].
pub fn memory_limit() -> MemoryLimit {
    match LIMIT.load(Ordering::Relaxed) {
        0 => match available_memory() {
            Some(bytes) => MemoryLimit {
                bytes,
                source: "the memory this machine has available (MemAvailable in /proc/meminfo)"
                    .into(),
            },
            None => MemoryLimit {
                bytes: FALLBACK_AVAILABLE,
                source: "assumed: this system does not report its available memory".into(),
            },
        },
        bytes => MemoryLimit {
            bytes,
            source: "set with --max-memory".into(),
        },
    }
}

/// Refuses `what` when its estimated need (`estimate`, bytes) exceeds the [`memory_limit`];
/// the error names both and how to raise the limit.
pub fn check_memory(what: &str, estimate: u64) -> Result<()> {
    check_against(what, estimate, &memory_limit())
}

/// [`check_memory`] against a given limit.
fn check_against(what: &str, estimate: u64, limit: &MemoryLimit) -> Result<()> {
    if estimate > limit.bytes {
        return Err(WorkbookError::InvalidConfig(format!(
            "{what} needs about {} of memory, more than the limit of {} ({}); use a smaller size, or raise the limit with --max-memory SIZE (e.g. --max-memory {}) if you know it fits (swap, or an estimate on the safe side)",
            format_bytes(estimate),
            format_bytes(limit.bytes),
            limit.source,
            format_size_arg(estimate),
        )));
    }
    Ok(())
}

/// A size as `--max-memory` takes it, rounded up: `25T`, `640M`.
fn format_size_arg(bytes: u64) -> String {
    let units = ["", "K", "M", "G", "T", "P", "E"];
    let mut v = bytes as f64;
    let mut k = 0;
    while v >= 1024.0 && k + 1 < units.len() {
        v /= 1024.0;
        k += 1;
    }
    format!("{}{}", v.ceil() as u64, units[k])
}

/// Parses a byte count as people write it: `8000000`, `512M`, `1.5G`, `2TiB`, `64gb` (K, M, G,
/// T, P, E are powers of 1024; an optional `B`, `iB` after them). At least 1 byte.
pub fn parse_bytes(text: &str) -> Result<u64> {
    let bad = || {
        WorkbookError::InvalidConfig(format!(
            "'{text}' is not a size: write a number of bytes with an optional unit, e.g. 512M, 16G or 1.5T"
        ))
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| bad())?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    let power = match unit {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        "e" => 6,
        _ => return Err(bad()),
    };
    let bytes = value * 1024f64.powi(power);
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(WorkbookError::InvalidConfig(format!(
            "'{text}': a size must be at least 1 byte and below 16 EB"
        )));
    }
    Ok(bytes as u64)
}

/// How many times its size in memory loading a file takes: the bytes read, the tensors parsed
/// from them, and the copy a model or graph makes of those tensors.
pub const LOAD_FACTOR: u64 = 3;

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
/// 8.5 GiB (docs/performance.md; graph plus this estimate: 8.0 GiB).
pub fn training_bytes(config: &impl ModelSize, nodes: usize, edges: usize) -> u64 {
    let n = nodes as f64;
    let e = edges as f64 + n; // self-loops
    let mut bytes = e * 48.0; // self-looped edge index and CSR (indices, order, weights)
    for layer in config.layer_sizes() {
        let (width_in, width_out, heads) = (
            layer.in_channels,
            layer.heads.saturating_mul(layer.out_channels),
            layer.heads,
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
pub fn check_training_fits(
    what: &str,
    config: &impl ModelSize,
    graph: &impl GraphSize,
) -> Result<()> {
    let (nodes, edges) = (graph.node_count(), graph.edge_count());
    check_memory(
        &format!("{what} on {} ({nodes} nodes, {edges} edges)", graph.label()),
        training_bytes(config, nodes, edges),
    )
}

/// Bytes of the parameters of `config` (float32).
pub fn parameter_bytes(config: &impl ModelSize) -> u64 {
    to_u64(config.parameter_elements() * 4.0)
}

/// One layer's share of a forward pass on `nodes` nodes and `edges` self-looped edges: its
/// linear outputs, the aggregated output and the activation (node tensors of the output width,
/// a copy of the input), and per edge and head the scores or normalised weights the fused
/// kernels keep.
fn layer_forward_bytes(width_in: usize, width_out: usize, heads: usize, n: f64, e: f64) -> f64 {
    4.0 * n * (width_in as f64 + 4.0 * width_out as f64) + 4.0 * 4.0 * e * heads as f64
}

/// Estimated peak bytes of a forward pass (inference: no gradients) of `config` on a graph of
/// `nodes` nodes and `edges` edges, beyond the graph itself: the parameters, the edge structures
/// (self-looped edge index, CSR) and each layer's node and edge tensors. What `predict`,
/// `export`'s pre-flight and each serving thread need. Saturates instead of overflowing.
pub fn inference_bytes(config: &impl ModelSize, nodes: usize, edges: usize) -> u64 {
    let n = nodes as f64;
    let e = edges as f64 + n; // self-loops
    let mut bytes = parameter_bytes(config) as f64 + e * 48.0;
    for l in config.layer_sizes() {
        bytes += layer_forward_bytes(
            l.in_channels,
            l.heads.saturating_mul(l.out_channels),
            l.heads,
            n,
            e,
        );
    }
    to_u64(bytes)
}

/// The layer of `config` that needs the most memory on `nodes` nodes and `edges` edges, named
/// with the numbers that make it so: `layer 1 (GCNConv: in_channels 1, heads × out_channels
/// 1 × 16777216)`.
pub fn largest_layer(config: &impl ModelSize, nodes: usize, edges: usize) -> String {
    let (n, e) = (nodes as f64, edges as f64 + nodes as f64);
    let layers = config.layer_sizes();
    let largest = layers.iter().enumerate().max_by(|(_, a), (_, b)| {
        let bytes = |l: &LayerSize| {
            layer_forward_bytes(
                l.in_channels,
                l.heads.saturating_mul(l.out_channels),
                l.heads,
                n,
                e,
            )
        };
        bytes(a).total_cmp(&bytes(b))
    });
    match largest {
        Some((k, l)) => {
            format!(
                "layer {} ({}: in_channels {}, heads × out_channels {} × {})",
                k + 1,
                l.kind,
                l.in_channels,
                l.heads,
                l.out_channels
            )
        }
        None => "no layers".into(),
    }
}

/// Refuses `what` (e.g. `predict on g.safetensors`), a forward pass of `config` on `nodes`
/// nodes and `edges` edges, when [`inference_bytes`] says it cannot fit; the error names the
/// graph's size and the layer that needs the most.
pub fn check_inference_fits(
    what: &str,
    config: &impl ModelSize,
    nodes: usize,
    edges: usize,
) -> Result<()> {
    check_memory(
        &format!(
            "{what} ({nodes} nodes, {edges} edges) with {}",
            largest_layer(config, nodes, edges)
        ),
        inference_bytes(config, nodes, edges),
    )
}

/// Estimated bytes of serving `requests` requests with `threads` threads sharing one model of
/// `config` on graphs of at most `nodes` nodes and `edges` edges: a forward pass per thread
/// at a time, and every response kept twice (the sequential reference and the concurrent run
/// being compared with it): the logits and each attention layer's weights and edge list.
pub fn serving_bytes(
    config: &impl ModelSize,
    nodes: usize,
    edges: usize,
    requests: usize,
    threads: usize,
) -> u64 {
    let n = nodes as f64;
    let e = edges as f64 + n;
    let layers = config.layer_sizes();
    let out = layers.last().map_or(0, |l| l.output_width) as f64;
    let attention: f64 = layers
        .iter()
        .filter(|l| l.attention)
        .map(|l| e * (4.0 * l.heads as f64 + 16.0))
        .sum();
    let response = 4.0 * n * out + attention;
    let forward = inference_bytes(config, nodes, edges) as f64;
    to_u64(threads as f64 * forward + 2.0 * requests as f64 * response)
}

/// Refuses serving `requests` requests with up to `threads` threads on `graph` (see
/// [`serving_bytes`]) when it cannot fit; the error names both numbers and the graph's size.
pub fn check_serving_fits(
    what: &str,
    config: &impl ModelSize,
    graph: &impl GraphSize,
    requests: usize,
    threads: usize,
) -> Result<()> {
    let (nodes, edges) = (graph.node_count(), graph.edge_count());
    check_memory(
        &format!(
            "{what}: {requests} requests with up to {threads} threads on {} ({nodes} nodes, {edges} edges)",
            graph.label()
        ),
        serving_bytes(config, nodes, edges, requests, threads),
    )
}

/// The most nodes and edges a sampled batch of `batch_size` seeds with `num_neighbors` per hop
/// (`-1`: all) can have on a graph of `nodes` nodes and `edges` edges: `batch_size × Π(1 +
/// fanout)` nodes at most, and never more than the graph.
pub fn batch_bound(
    nodes: usize,
    edges: usize,
    batch_size: usize,
    num_neighbors: &[i64],
) -> (usize, usize) {
    let (n, e) = (nodes as f64, edges as f64);
    let (mut frontier, mut batch_nodes, mut batch_edges) =
        (batch_size as f64, batch_size as f64, 0.0);
    for &k in num_neighbors {
        let fan = if k < 0 { n } else { k as f64 };
        let sampled = frontier * fan;
        batch_edges += sampled;
        batch_nodes += sampled;
        frontier = sampled.min(n);
    }
    (batch_nodes.min(n) as usize, batch_edges.min(e) as usize)
}

/// Estimated bytes of mini-batch training of `config` on a graph of `nodes` nodes and `edges`
/// edges, `batch_size` seeds a batch, `num_neighbors` per hop (`-1`: all) and `in_flight`
/// batches at a time (1, plus those prefetched; one per device for data parallelism): the
/// loader's CSR and a training step on each batch in flight ([`batch_bound`]).
pub fn minibatch_bytes(
    config: &impl ModelSize,
    nodes: usize,
    edges: usize,
    batch_size: usize,
    num_neighbors: &[i64],
    in_flight: usize,
) -> u64 {
    let (bn, be) = batch_bound(nodes, edges, batch_size, num_neighbors);
    let step = training_bytes(config, bn, be) as f64;
    to_u64(edges as f64 * 16.0 + nodes as f64 * 8.0 + in_flight.max(1) as f64 * step)
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

    /// A two-layer model of 32 → 16 → 5 channels, as the estimates see one.
    struct TwoLayers;

    impl ModelSize for TwoLayers {
        fn layer_sizes(&self) -> Vec<LayerSize> {
            let layer = |i, o| LayerSize {
                kind: "GCNConv",
                in_channels: i,
                out_channels: o,
                heads: 1,
                output_width: o,
                attention: false,
            };
            vec![layer(32, 16), layer(16, 5)]
        }
        fn parameter_elements(&self) -> f64 {
            (32 * 16 + 16 + 16 * 5 + 5) as f64
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
        let c = TwoLayers;
        assert!(training_bytes(&c, 1_000, 10_000) < training_bytes(&c, 1_000_000, 10_000_000));
        let err = check_memory("a test", u64::MAX).unwrap_err().to_string();
        assert!(err.contains("needs about 16.0 EB"), "{err}");
        assert!(err.contains("available"), "{err}");
        assert!(check_memory("a test", 1).is_ok());
    }

    #[test]
    fn a_set_limit_is_named_in_the_error() {
        let limit = MemoryLimit {
            bytes: 1 << 20,
            source: "set with --max-memory".into(),
        };
        let err = check_against("predict on g (5 nodes)", 3 << 20, &limit)
            .unwrap_err()
            .to_string();
        for needle in [
            "predict on g (5 nodes) needs about 3.0 MB",
            "limit of 1.0 MB (set with --max-memory)",
            "--max-memory 3M",
        ] {
            assert!(err.contains(needle), "{needle:?} missing from: {err}");
        }
        assert!(check_against("x", 1 << 20, &limit).is_ok());
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("64gb").unwrap(), 64 << 30);
        assert_eq!(parse_bytes("1.5T").unwrap(), 3 << 39);
        for bad in ["", "G", "12Q", "-5G", "0", "0.1", "1.2.3G", "99999E"] {
            let err = parse_bytes(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{bad:?}: {err}");
        }
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
