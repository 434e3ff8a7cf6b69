//! What the driver made of each built-in matmul kernel the matmul benchmark
//! names (the SGEMM tiles, the fixed f32 tiles and the 16-byte one, the NV
//! and KHR cooperative-matrix tiles, the coopmat2 tiles with their launch
//! orders) and of the skinny `linear_*` kernels: one table of the
//! statistics `VK_KHR_pipeline_executable_properties` reports (register
//! count, shared memory, spills: the names are the driver's). Each matmul
//! plan runs one tiny dispatch first, so its pipeline is the one a real
//! launch builds (specialization included); the `linear_*` kernels take
//! none and are built directly. Plans the adapter cannot run are listed
//! with the reason.
//!
//! ```text
//! cargo run --release -p vkcompute-measure --example kernel_statistics
//! cargo run --release -p vkcompute-measure --example kernel_statistics -- --only linear_bf16
//! ```
//!
//! `--only PREFIX` lists only the built-ins whose names start with PREFIX
//! and runs no matmul plan (building every pipeline takes minutes).
//! `--spv FILE...` (the arguments after it) adds rows for SPIR-V files,
//! such as `linear_probe`'s builds of the skinny kernel, and with no
//! `--only` lists nothing else.

use vkcompute::ops::{
    self, Cm2Tile, CoopTile, MatmulKernel, MatmulPlan, SgemmTile, TileConfig, F16,
};
use vkcompute::{Buffer, Device, DeviceOptions, Kernel, Result};

fn main() -> Result<()> {
    let gpu = Device::with_options(DeviceOptions {
        pipeline_statistics: true,
        ..DeviceOptions::default()
    })?;
    let info = gpu.info();
    println!("{} ({} {})", info.name, info.driver_name, info.driver_info);
    if !info.pipeline_executable_properties {
        println!(
            "skipped: {} does not list VK_KHR_pipeline_executable_properties with \
             pipelineExecutableInfo",
            info.name
        );
        return Ok(());
    }

    // One tiny dispatch per plan: K and N multiples of 4 (16-byte loads)
    // and not (scalar kernels) for f32, 64³ for f16.
    let plan = |kernel| MatmulPlan {
        kernel,
        widen_f16: false,
    };
    let f32_tiles = [
        TileConfig::LARGE,
        TileConfig::SMALL,
        TileConfig::NARROW,
        TileConfig::DEEP_VEC4,
    ];
    let f32_plans = SgemmTile::ALL
        .iter()
        .map(|&tile| MatmulKernel::Sgemm { tile, splits: 1 })
        .chain(f32_tiles.iter().map(|&t| MatmulKernel::Tiled(t)));
    let coop = [CoopTile::DEFAULT, CoopTile::WIDE, CoopTile::TALL];
    let f16_plans = coop
        .iter()
        .flat_map(|&t| [MatmulKernel::CoopMatF16(t), MatmulKernel::CoopMatKhrF16(t)])
        .chain(Cm2Tile::ALL.iter().map(|&t| MatmulKernel::CoopMat2F16(t)));
    let mut args: Vec<String> = std::env::args().collect();
    let spv: Vec<String> = match args.iter().position(|a| a == "--spv") {
        Some(i) => args.split_off(i).into_iter().skip(1).collect(),
        None => Vec::new(),
    };
    let only = match args.iter().position(|a| a == "--only") {
        Some(i) => match args.get(i + 1) {
            Some(p) => Some(p.clone()),
            None => {
                eprintln!("usage: kernel_statistics [--only PREFIX] [--spv FILE...]");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let mut not_run = Vec::new();
    let mut batch = gpu.batch()?;
    let m = 16u32;
    let listing = only.is_none() && spv.is_empty();
    let f32_plans = f32_plans.filter(|_| listing);
    let f16_plans = f16_plans.filter(|_| listing);
    for kernel in f32_plans {
        for kn in [64u32, 63] {
            let a = gpu.alloc::<f32>((m * kn) as usize)?;
            let b = gpu.alloc::<f32>((kn * kn) as usize)?;
            let c = gpu.alloc::<f32>((m * kn) as usize)?;
            if let Err(e) =
                ops::matmul::matmul_with_plan(&mut batch, &a, &b, &c, m, kn, kn, plan(kernel))
            {
                not_run.push(format!("{kernel:?} at {m}×{kn}×{kn}: {e}"));
            }
        }
    }
    let h16: Buffer<u16> = gpu.upload(&vec![F16::from_f32(0.5).0; 64 * 64])?;
    let c16 = gpu.alloc::<f32>(64 * 64)?;
    for kernel in f16_plans {
        if let Err(e) = ops::matmul::matmul_f16_with_plan(
            &mut batch,
            &h16,
            &h16,
            &c16,
            64,
            64,
            64,
            plan(kernel),
        ) {
            not_run.push(format!("{kernel:?}: {e}"));
        }
    }
    batch.submit()?;

    // The kernels those plans name, then every skinny linear kernel (with
    // `--only`, the built-ins it names).
    let mut names: Vec<&str> = match &only {
        Some(p) => ops::builtin_names()
            .into_iter()
            .filter(|n| n.starts_with(p.as_str()))
            .collect(),
        None if !spv.is_empty() => Vec::new(),
        None => {
            let sgemm = SgemmTile::ALL
                .iter()
                .flat_map(|t| [t.kernel_name(true), t.kernel_name(false)]);
            let fixed = f32_tiles.iter().map(TileConfig::fixed_kernel);
            let coop_names = coop.iter().flat_map(|t| [t.fixed_kernel(), t.khr_kernel()]);
            let cm2 = Cm2Tile::ALL.iter().map(Cm2Tile::kernel_name);
            let mut names: Vec<&str> = sgemm
                .chain(fixed)
                .chain(coop_names)
                .chain(cm2)
                .flatten()
                .collect();
            names.extend(["matmul_f32_vec4", "matmul_f32"]);
            names.extend(
                ops::builtin_names()
                    .into_iter()
                    .filter(|n| n.starts_with("linear_")),
            );
            names
        }
    };
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(*n));

    // Rows: (kernel, spec, executable, its statistics); columns: every
    // statistic name any row reports, in the order first seen.
    let mut rows = Vec::new();
    for file in &spv {
        let built = std::fs::read(file)
            .map_err(|e| format!("{e}"))
            .and_then(|bytes| {
                let kernel =
                    Kernel::from_spirv(&gpu, bytes.as_slice()).map_err(|e| format!("{e}"))?;
                kernel.statistics().map_err(|e| format!("{e}"))
            });
        match built {
            Ok(executables) => {
                for e in executables {
                    rows.push((file.as_str(), "file".to_string(), e));
                }
            }
            Err(e) => not_run.push(format!("{file}: {e}")),
        }
    }
    for name in names {
        match ops::builtin_statistics(&gpu, name) {
            Ok(pipelines) => {
                for p in pipelines {
                    for e in p.executables {
                        rows.push((name, format!("{:?}", p.spec), e));
                    }
                }
            }
            Err(e) => not_run.push(format!("{name}: {e}")),
        }
    }
    let mut columns: Vec<(String, String)> = Vec::new();
    for (_, _, e) in &rows {
        for s in &e.statistics {
            if !columns.iter().any(|(n, _)| *n == s.name) {
                columns.push((s.name.clone(), s.description.clone()));
            }
        }
    }
    print!("\n| kernel | spec | executable | subgroup |");
    columns.iter().for_each(|(n, _)| print!(" {n} |"));
    print!("\n|---|---|---|---|");
    columns.iter().for_each(|_| print!("---|"));
    println!();
    for (name, spec, e) in &rows {
        print!("| {name} | {spec} | {} | {} |", e.name, e.subgroup_size);
        for (col, _) in &columns {
            match e.get(col) {
                Some(v) => print!(" {v} |"),
                None => print!(" – |"),
            }
        }
        println!();
    }
    println!("\nstatistics, as the driver describes them:");
    for (n, d) in &columns {
        println!("  {n}: {d}");
    }
    if !not_run.is_empty() {
        println!("\nnot on this adapter:");
        for r in &not_run {
            println!("  {r}");
        }
    }
    Ok(())
}
