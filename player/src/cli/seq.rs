//! `pfx-player seq`: look inside FSEQ sequence files.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::json;

use crate::source::fseq;

#[derive(clap::Args, Debug)]
pub struct SeqArgs {
    #[command(subcommand)]
    cmd: SeqCmd,
}

#[derive(clap::Subcommand, Debug)]
enum SeqCmd {
    /// Print a sequence's header: version, channels, frames, step, compression, blocks.
    Inspect {
        file: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Write frame N's channel bytes (sparse ranges expanded) to stdout, binary.
    Frame { file: PathBuf, n: u32 },
    /// Write frames FROM.. (COUNT of them, default all) back to back to stdout, binary.
    Dump {
        file: PathBuf,
        #[arg(long, default_value_t = 0)]
        from: u32,
        #[arg(long)]
        count: Option<u32>,
    },
}

pub fn run(args: SeqArgs) -> anyhow::Result<ExitCode> {
    match args.cmd {
        SeqCmd::Inspect { file, json } => inspect(&file, json),
        SeqCmd::Frame { file, n } => dump(&file, n, Some(1), true),
        SeqCmd::Dump { file, from, count } => dump(&file, from, count, false),
    }
}

fn inspect(path: &std::path::Path, as_json: bool) -> anyhow::Result<ExitCode> {
    use std::fmt::Write as _;
    let mut o = String::new();
    let f = fseq::open(path)?;
    let h = f.header();
    let blocks: Vec<_> = h
        .blocks
        .iter()
        .map(|b| json!({"index": b.index, "first_frame": b.first_frame, "frames": b.frames, "offset": b.offset, "len": b.len}))
        .collect();
    let ranges: Vec<_> = h
        .sparse_ranges
        .iter()
        .map(|&(s, c)| json!({"start": s, "count": c}))
        .collect();
    let vars: Vec<_> = h
        .variable_headers
        .iter()
        .map(|v| json!({"code": v.code_str(), "len": v.data.len()}))
        .collect();
    if as_json {
        let v = json!({
            "file": path.display().to_string(),
            "version": h.version(),
            "channels": h.channel_count,
            "frame_len": f.frame_len(),
            "frames": h.frames,
            "step_ms": h.step_ms,
            "duration_ms": f.duration().as_millis() as u64,
            "compression": h.compression.name(),
            "data_offset": h.data_offset,
            "unique_id": h.unique_id,
            "block_table_len": h.block_table_len,
            "blocks": blocks,
            "sparse_ranges": ranges,
            "media_file": h.media_file(),
            "producer": h.producer(),
            "variable_headers": vars,
        });
        writeln!(o, "{}", serde_json::to_string_pretty(&v)?)?;
        return emit(&o);
    }
    let d = f.duration();
    writeln!(o, "file          {}", path.display())?;
    writeln!(o, "version       {}", h.version())?;
    writeln!(
        o,
        "channels      {} per stored frame, {} expanded",
        h.channel_count,
        f.frame_len()
    )?;
    writeln!(o, "frames        {}", h.frames)?;
    writeln!(o, "step          {} ms", h.step_ms)?;
    writeln!(
        o,
        "duration      {}.{:03} s",
        d.as_secs(),
        d.subsec_millis()
    )?;
    writeln!(o, "compression   {}", h.compression.name())?;
    writeln!(
        o,
        "blocks        {} used of {} table entries",
        h.blocks.len(),
        h.block_table_len
    )?;
    if let (Some(first), Some(last)) = (h.blocks.first(), h.blocks.last()) {
        writeln!(
            o,
            "              first: {} frames, {} bytes; last: frames {}.. ({} bytes)",
            first.frames, first.len, last.first_frame, last.len
        )?;
    }
    if h.sparse_ranges.is_empty() {
        writeln!(o, "sparse ranges none")?;
    } else {
        for (i, &(s, c)) in h.sparse_ranges.iter().enumerate() {
            writeln!(
                o,
                "sparse range  {i}: channels {s}..{} ({c})",
                s as u64 + c as u64
            )?;
        }
    }
    writeln!(
        o,
        "media file    {}",
        h.media_file().unwrap_or_else(|| "-".into())
    )?;
    writeln!(
        o,
        "producer      {}",
        h.producer().unwrap_or_else(|| "-".into())
    )?;
    for v in &h.variable_headers {
        writeln!(o, "var header    '{}' {} bytes", v.code_str(), v.data.len())?;
    }
    emit(&o)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn dump(
    path: &std::path::Path,
    from: u32,
    count: Option<u32>,
    single: bool,
) -> anyhow::Result<ExitCode> {
    let mut f = fseq::open(path)?;
    let frames = f.frames();
    if from >= frames || (single && frames == 0) {
        anyhow::bail!(
            "{}: frame {from} is out of range: valid frames are 0..={} ({frames} frames)",
            path.display(),
            frames.saturating_sub(1)
        );
    }
    let end = match count {
        Some(c) => from.saturating_add(c).min(frames),
        None => frames,
    };
    let mut buf = vec![0u8; f.frame_len()];
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for n in from..end {
        f.read_frame(n, &mut buf)?;
        if let Err(e) = out.write_all(&buf) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(e).context("writing frame data to stdout");
        }
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing frame data to stdout")
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
