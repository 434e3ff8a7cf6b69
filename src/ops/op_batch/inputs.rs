//! An op batch's inputs: uploads, imported buffers, imported slices of a
//! buffer (of any [`TensorElement`]), and per-launch [`Params`] values;
//! and [`Bound`], the memory a storage binds.

use std::sync::Arc;

use bytemuck::Pod;

use super::{shape_err, OpBatch};
use crate::ops::dtype::TensorElement;
use crate::ops::tensor::{Shape, Tensor};
use crate::{Buffer, BufferSlice, Error, GpuBuf, Params, Result};

/// The memory a storage binds: `bytes` bytes of a buffer from byte
/// `start` (a whole upload or pooled buffer starts at 0; a slice import
/// anywhere its byte offset is aligned).
#[derive(Clone)]
pub(crate) struct Bound {
    /// The whole buffer, as bytes.
    pub raw: Buffer<u8>,
    /// The storage's first byte.
    pub start: u64,
    /// The storage's length in bytes.
    pub bytes: u64,
    /// The whole buffer as f32s, where its size is a whole number of them
    /// (every buffer but some 16-bit imports).
    words: Option<Buffer<f32>>,
}

impl Bound {
    /// `len` elements of `buf` from element `start`.
    pub fn of<T: Pod>(buf: &Buffer<T>, start: usize, len: usize) -> Bound {
        let size = std::mem::size_of::<T>() as u64;
        let raw = buf
            .reinterpret::<u8>()
            .expect("every buffer is a whole number of bytes");
        Bound {
            words: buf.reinterpret::<f32>(),
            raw,
            start: start as u64 * size,
            bytes: len as u64 * size,
        }
    }

    /// The binding as f32s, exactly the storage's elements (an f32
    /// storage's; bound by the built-in f32 kernels).
    pub fn slice(&self) -> Result<BufferSlice<'_, f32>> {
        let (buf, start) = self.f32_buffer()?;
        buf.slice(start..start + (self.bytes / 4) as usize)
    }

    /// The whole buffer as f32s and the storage's first f32 in it.
    pub fn f32_buffer(&self) -> Result<(&Buffer<f32>, usize)> {
        match &self.words {
            Some(w) if self.start % 4 == 0 && self.bytes % 4 == 0 => {
                Ok((w, (self.start / 4) as usize))
            }
            _ => Err(Error::TensorUnavailable {
                detail: "op batch internal error: a 16-bit storage bound as f32s".into(),
            }),
        }
    }

    /// The binding as bytes, exactly the storage's (bound by generated
    /// kernels, which read any element type).
    pub fn raw_slice(&self) -> Result<BufferSlice<'_, u8>> {
        let start = self.start as usize;
        self.raw.slice(start..start + self.bytes as usize)
    }

    /// The storage's bytes, downloaded.
    pub fn read_bytes(&self, bytes: u64) -> Result<Vec<u8>> {
        let start = self.start as usize;
        self.raw.read_range(start..start + bytes as usize)
    }

    /// The buffer's identity.
    pub fn key(&self) -> usize {
        Arc::as_ptr(&self.raw.inner) as usize
    }

    /// (identity, first byte, end byte), for barriers over shared memory.
    pub fn range(&self) -> (usize, u64, u64) {
        (self.key(), self.start, self.start + self.bytes)
    }
}

/// Reads a [`Params`]' value as f32s (type-erased over its length).
pub(crate) type ParamsValue = Box<dyn Fn() -> Vec<f32> + Send + Sync>;

impl OpBatch {
    /// A vector tensor holding `data` (copied to the GPU now).
    pub fn upload(&mut self, data: &[f32]) -> Result<Tensor> {
        self.upload_as(data)
    }

    /// A `rows`×`cols` row-major matrix tensor holding `data`.
    pub fn upload_matrix(&mut self, data: &[f32], rows: u32, cols: u32) -> Result<Tensor> {
        self.upload_matrix_as(data, rows, cols)
    }

    /// A vector tensor of `T`'s element type (f32, [`F16`](crate::ops::F16),
    /// [`Bf16`](crate::ops::Bf16) or `u32`) holding `data` (copied to the
    /// GPU now).
    pub fn upload_as<T: TensorElement>(&mut self, data: &[T]) -> Result<Tensor> {
        let n = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.upload_shaped(data, Shape::Vector(n))
    }

    /// [`OpBatch::upload_as`] as a `rows`×`cols` row-major matrix.
    pub fn upload_matrix_as<T: TensorElement>(
        &mut self,
        data: &[T],
        rows: u32,
        cols: u32,
    ) -> Result<Tensor> {
        self.upload_shaped(data, Shape::Matrix(rows, cols))
    }

    /// A tensor of any [`Shape`] (rank 1 to 4, row-major) and `T`'s
    /// element type holding `data` (copied to the GPU now); `data` must
    /// have `shape.numel()` elements, else an [`Error::OpShape`].
    pub fn upload_shaped<T: TensorElement>(&mut self, data: &[T], shape: Shape) -> Result<Tensor> {
        Self::check_shape("OpBatch::upload", "the data", shape)?;
        if data.len() as u64 != shape.numel() {
            return Err(shape_err(
                "OpBatch::upload",
                format!("{} values given for shape {shape}", data.len()),
            ));
        }
        let buf = self.gpu.upload(data)?;
        let v = self.graph.leaf_typed(shape, T::DTYPE);
        self.grow_storages();
        let s = self.graph.values[v].storage;
        self.buffers[s] = Some(Bound::of(&buf, 0, data.len()));
        self.fixed[s] = true;
        Ok(self.new_tensor(v))
    }

    /// A tensor of any [`Shape`] (rank 1 to 4, row-major) over `buf`
    /// itself (no copy; as [`OpBatch::import`]), of `T`'s element type;
    /// `buf` must have `shape.numel()` elements, else an
    /// [`Error::OpShape`].
    pub fn import_shaped<T: TensorElement>(
        &mut self,
        buf: &Buffer<T>,
        shape: Shape,
    ) -> Result<Tensor> {
        self.import_range("OpBatch::import_shaped", buf, 0, buf.len(), shape)
    }

    /// A vector tensor over `buf` itself (no copy; the op batch keeps the
    /// buffer alive). Importing the same buffer again names the same
    /// storage, so hazards between the two tensors are tracked.
    pub fn import(&mut self, buf: &Buffer<f32>) -> Result<Tensor> {
        self.import_as(buf)
    }

    /// A `rows`×`cols` matrix tensor over `buf` (exactly that long).
    pub fn import_matrix(&mut self, buf: &Buffer<f32>, rows: u32, cols: u32) -> Result<Tensor> {
        self.import_matrix_as(buf, rows, cols)
    }

    /// [`OpBatch::import`] for a buffer of any [`TensorElement`]: a tensor
    /// of its element type over `buf` itself. The same buffer imported as
    /// another element type is refused ([`Error::OpShape`]: the two
    /// tensors would alias).
    pub fn import_as<T: TensorElement>(&mut self, buf: &Buffer<T>) -> Result<Tensor> {
        let n = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        self.import_range("OpBatch::import", buf, 0, buf.len(), Shape::Vector(n))
    }

    /// [`OpBatch::import_as`] as a `rows`×`cols` matrix (`buf` exactly that
    /// long).
    pub fn import_matrix_as<T: TensorElement>(
        &mut self,
        buf: &Buffer<T>,
        rows: u32,
        cols: u32,
    ) -> Result<Tensor> {
        let shape = Shape::Matrix(rows, cols);
        self.import_range("OpBatch::import", buf, 0, buf.len(), shape)
    }

    /// [`OpBatch::import_slice`] for a slice of any [`TensorElement`], with
    /// the same alignment rule (its byte offset a multiple of
    /// `minStorageBufferOffsetAlignment` and of 16).
    pub fn import_slice_as<T: TensorElement>(&mut self, s: &BufferSlice<'_, T>) -> Result<Tensor> {
        let n = u32::try_from(s.len()).unwrap_or(u32::MAX);
        self.import_range(
            "OpBatch::import_slice",
            s.buffer(),
            s.start(),
            s.len(),
            Shape::Vector(n),
        )
    }

    /// [`OpBatch::import_slice_as`] as a `rows`×`cols` matrix (the slice
    /// exactly that long).
    pub fn import_slice_matrix_as<T: TensorElement>(
        &mut self,
        s: &BufferSlice<'_, T>,
        rows: u32,
        cols: u32,
    ) -> Result<Tensor> {
        let shape = Shape::Matrix(rows, cols);
        self.import_range(
            "OpBatch::import_slice",
            s.buffer(),
            s.start(),
            s.len(),
            shape,
        )
    }

    /// A vector tensor over the elements of `s` (no copy): one buffer can
    /// hold many weights, each imported as its slice. The slice's byte
    /// offset must be a multiple of the adapter's
    /// `minStorageBufferOffsetAlignment` and of 16 (the vec4 kernels' row
    /// alignment), else [`Error::OpShape`] naming the offset and the limit.
    /// The same slice imported again names the same storage; a slice that
    /// overlaps another imported range of the buffer without being equal
    /// to it is refused (two tensors would alias memory the op batch
    /// cannot order within one kernel).
    pub fn import_slice(&mut self, s: &BufferSlice<'_, f32>) -> Result<Tensor> {
        self.import_slice_as(s)
    }

    /// [`OpBatch::import_slice`] as a `rows`×`cols` matrix (the slice
    /// exactly that long).
    pub fn import_slice_matrix(
        &mut self,
        s: &BufferSlice<'_, f32>,
        rows: u32,
        cols: u32,
    ) -> Result<Tensor> {
        self.import_slice_matrix_as(s, rows, cols)
    }

    /// A vector tensor of `N` elements whose value is `p`'s: at each
    /// [`Graph::launch`](crate::Graph::launch) of a graph made from this op
    /// batch, the value `p` held when that launch was made (each launch
    /// keeps its own, as [`Params`] says); at each
    /// [`OpBatch::execute`], the value `p` holds then (the execute writes
    /// it into `p`'s device buffer first). Importing the same `Params`
    /// again names the same storage. An in-place op on the tensor writes
    /// `p`'s device buffer, which the next launch or execute sets again.
    pub fn import_params<const N: usize>(&mut self, p: &Params<[f32; N]>) -> Result<Tensor>
    where
        [f32; N]: bytemuck::Pod,
    {
        let n = u32::try_from(N).unwrap_or(u32::MAX);
        let buf = p.buffer().reinterpret::<f32>().ok_or_else(|| {
            shape_err(
                "OpBatch::import_params",
                "the value is not a whole number of f32s".into(),
            )
        })?;
        let key = Arc::as_ptr(&buf.inner) as usize;
        let seen = self.import_keys.iter().any(|k| k.0 == key);
        let t = self.import_range("OpBatch::import_params", &buf, 0, N, Shape::Vector(n))?;
        if !seen {
            let s = self.graph.values[self.value(&t)?].storage;
            let p = p.clone();
            self.params.push((s, Box::new(move || p.get().to_vec())));
        }
        Ok(t)
    }

    fn import_range<T: TensorElement>(
        &mut self,
        op: &'static str,
        buf: &Buffer<T>,
        start: usize,
        len: usize,
        shape: Shape,
    ) -> Result<Tensor> {
        Self::check_shape(op, "the buffer", shape)?;
        if len as u64 != shape.numel() {
            return Err(shape_err(
                op,
                format!(
                    "the buffer has {len} elements, shape {shape} needs {}",
                    shape.numel()
                ),
            ));
        }
        if buf.device().id() != self.gpu.id() {
            return Err(Error::TensorUnavailable {
                detail: "the buffer lives on another device than this op batch".into(),
            });
        }
        let size = T::DTYPE.size();
        let offset = start as u64 * size;
        let align = self.gpu.info().min_storage_buffer_offset_alignment.max(16);
        if offset % align != 0 {
            return Err(shape_err(
                op,
                format!(
                    "the slice starts at byte offset {offset}, not a multiple of {align} \
                     (the adapter's minStorageBufferOffsetAlignment, {}, and the 16 bytes \
                     of the vec4 kernels); import slices that start at a multiple of {} \
                     elements",
                    self.gpu.info().min_storage_buffer_offset_alignment,
                    align / size
                ),
            ));
        }
        let key = Arc::as_ptr(buf.view().inner) as usize;
        let (lo, hi) = (offset, offset + len as u64 * size);
        let same = self
            .import_keys
            .iter()
            .find(|&&(k, a, b, _)| k == key && a == lo && b == hi);
        let v = match same {
            Some(&(_, _, _, s)) if self.graph.storage_dtype[s] == T::DTYPE => {
                self.graph.leaf_in(shape, s)
            }
            Some(&(_, _, _, s)) => {
                return Err(shape_err(
                    op,
                    format!(
                        "bytes {lo}..{hi} of the buffer were imported before as {}, now as {}; \
                         import each range as one element type",
                        self.graph.storage_dtype[s],
                        T::DTYPE
                    ),
                ));
            }
            None => {
                if let Some(&(_, a, b, _)) = self
                    .import_keys
                    .iter()
                    .find(|&&(k, a, b, _)| k == key && a < hi && lo < b)
                {
                    return Err(shape_err(
                        op,
                        format!(
                            "bytes {lo}..{hi} of the buffer overlap bytes {a}..{b}, \
                             imported before; import equal or disjoint ranges"
                        ),
                    ));
                }
                let v = self.graph.leaf_typed(shape, T::DTYPE);
                let s = self.graph.values[v].storage;
                self.import_keys.push((key, lo, hi, s));
                self.grow_storages();
                self.buffers[s] = Some(Bound::of(buf, start, len));
                self.imported[s] = true;
                self.fixed[s] = true;
                v
            }
        };
        Ok(self.new_tensor(v))
    }
}
