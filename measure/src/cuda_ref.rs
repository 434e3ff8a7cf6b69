//! Reading the CUDA references' output where an example prints it beside
//! its own figures: `cuda_anchor.py` and `cuda_ops_anchor.py` print one
//! flat JSON object, `cuda_persist.cu` one JSON object per line.

/// The number after `"key":` in flat JSON text (its first occurrence).
pub fn anchor_value(json: &str, key: &str) -> Option<f64> {
    let at = json.find(&format!("\"{key}\""))? + key.len() + 2;
    let rest = json[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// `cuda_persist.cu`'s `"value"` on its line `"anchor": "<anchor>"`.
pub fn persist_value(text: &str, anchor: &str) -> Option<f64> {
    let tag = format!("\"anchor\": \"{anchor}\"");
    anchor_value(text.lines().find(|l| l.contains(&tag))?, "value")
}

/// `cuda_persist.cu`'s grid.sync µs per step, by block count.
pub fn persist_grid_sync(text: &str) -> Vec<(u32, f64)> {
    text.lines()
        .filter(|l| l.contains("\"grid_sync\""))
        .filter_map(|l| {
            Some((
                anchor_value(l, "blocks")? as u32,
                anchor_value(l, "us_per_step")?,
            ))
        })
        .collect()
}
