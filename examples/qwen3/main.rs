//! Opens a Hugging Face Qwen3 or Llama checkpoint directory and reports
//! what it holds: `cargo run --release --example qwen3 -- DIR`, or
//! `-- --tiny DIR [qwen3|llama]` to write a tiny random checkpoint there
//! first.

#[allow(dead_code)]
mod checkpoint;
#[allow(dead_code)]
mod config;
#[allow(dead_code)]
mod tiny;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use checkpoint::{Checkpoint, LoadError};
use config::{Arch, WeightDtype};

fn run(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let dir = match args {
        [flag, dir, rest @ ..] if flag == "--tiny" => {
            let arch = match rest.first().map(String::as_str) {
                None | Some("qwen3") => Arch::Qwen3,
                Some("llama") => Arch::Llama,
                Some(other) => return Err(format!("unknown tiny model {other:?}").into()),
            };
            let dir = PathBuf::from(dir);
            let c = tiny::tiny_config(arch, WeightDtype::Bf16);
            tiny::write_checkpoint(&dir, &c, 1, 1)?;
            dir
        }
        [dir] => PathBuf::from(dir),
        _ => return Err("usage: qwen3 DIR | qwen3 --tiny DIR [qwen3|llama]".into()),
    };
    let t = Instant::now();
    let ck = Checkpoint::open(&dir)?;
    ck.check_layout()?;
    let took = t.elapsed();
    println!("{:#?}", ck.config);
    println!(
        "{} tensors, {} bytes in {} file(s), opened and checked in {:.1} ms",
        ck.names().len(),
        ck.total_bytes(),
        ck.files().len(),
        took.as_secs_f64() * 1e3
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let kind = if e.downcast_ref::<LoadError>().is_some() {
                "load error"
            } else {
                "error"
            };
            eprintln!("{kind}: {e}");
            ExitCode::FAILURE
        }
    }
}
