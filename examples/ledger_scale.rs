//! Measures the metadata ledger on a large tree: `cargo run --release --example ledger_scale
//! [paths] [batch-bytes] [fan-in]` (default 2,000,000 paths, 64 KiB batches, fan-in 8). Prints
//! the time, the records written to spill files (tiered merging writes each path once per level),
//! and the peak resident memory.

use std::time::Instant;

use native_sandbox::transfer::ledger::{EntryKind, Ledger};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = |n: usize, default: u64| {
        std::env::args()
            .nth(n)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let paths = arg(1, 2_000_000);
    let batch = arg(2, 64 * 1024);
    let fan_in = arg(3, 8);
    let spill = std::env::temp_dir().join(format!("native-sandbox-ledger-{}", std::process::id()));
    std::fs::create_dir_all(&spill)?;
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let started = Instant::now();
    let (result, written) = runtime
        .block_on(async {
            let mut ledger = Ledger::new(Some(&spill), batch, fan_in);
            for i in 0..paths {
                let path = format!("src/d{:03}/e{:02}/file-{i:08}.ts", i % 1000, i % 37);
                ledger.add(&path, EntryKind::File).await?;
            }
            let written = ledger.spilled_records();
            ledger.check().await.map(|()| written)
        })
        .map_or_else(|e| (Err(e), 0), |w| (Ok(()), w));
    let seconds = started.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&spill)?;
    result?;
    println!(
        "{{\"paths\":{paths},\"batchBytes\":{batch},\"fanIn\":{fan_in},\"seconds\":{seconds:.2},\"recordsWrittenBeforeCheck\":{written},\"writesPerPath\":{:.2},\"peakRssMiB\":{:.1}}}",
        written as f64 / paths as f64,
        peak_rss_kib() as f64 / 1024.0
    );
    Ok(())
}
