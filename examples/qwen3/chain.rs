//! The decode step's layer tail as one `ops::linear_chain`: after a
//! layer's attention, its o projection with the residual, the RMSNorm-ed
//! gate|up projection with SiLU·mul and the down projection with the
//! residual, then the next layer's RMSNorm-ed q|k|v projection. (The LM
//! head stays a launch of its own: 0.78 GB streams at the copy's bandwidth
//! there, and took 254 µs as the last layer's fourth stage against 185
//! alone on an H200.) Where the
//! adapter's resident workgroups are known that is one persistent dispatch
//! in place of four, whose workgroups start streaming each layer's weights
//! before the previous layer has drained.

use vkcompute::ops::{self, ChainPlan, ChainStage, Epilogue};
use vkcompute::Batch;

use crate::buffers::Rows;
use crate::model::{Layer, Model, Result};

impl Model {
    /// Records layer `l`'s tail and `next`'s q|k|v projection (split into
    /// q, k and v where the rows need it; none after the last layer) as
    /// one chain. `r.ao` holds the attention output.
    pub(crate) fn record_chain(
        &self,
        b: &mut Batch,
        l: &Layer,
        next: Option<&Layer>,
        r: &Rows,
    ) -> Result<()> {
        let d = &self.dims;
        let m = r.m;
        let res = Epilogue::Residual(&r.h);
        let mut stages = vec![
            ChainStage::new(&r.ao, l.o.weights(), &r.h, (m, d.qw(), d.hidden), res),
            ChainStage::new(
                &r.h,
                l.gate_up.weights(),
                &r.mlp,
                (m, d.hidden, 2 * d.inter),
                Epilogue::SiluMul,
            )
            .normed(&l.post_norm, d.eps),
            ChainStage::new(&r.mlp, l.down.weights(), &r.h, (m, d.inter, d.hidden), res),
        ];
        if let Some(n) = next {
            let qkv = (m, d.hidden, d.qw() + 2 * d.kvw());
            stages.push(
                ChainStage::new(&r.h, n.qkv.weights(), &r.qkv, qkv, Epilogue::None)
                    .normed(&n.in_norm, d.eps),
            );
        }
        let fault = Some(self.state.chain_fault());
        match self.opts.chain_workgroups {
            Some(workgroups) => {
                let plan = ChainPlan::Persistent { workgroups };
                ops::linear_chain_with_plan(b, &stages, fault, plan)?
            }
            None => {
                ops::linear_chain(b, &stages, fault)?;
            }
        }
        if next.is_some() {
            r.split_qkv(b)?;
        }
        Ok(())
    }
}
