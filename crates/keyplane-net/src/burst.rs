//! [`Burst`]: a caller-owned arena of frame buffers, allocated once.

use crate::port::{BURST, FRAME_CAPACITY};
use crate::{Error, Result};

/// A reusable, caller-owned set of up to `capacity` frame buffers of [`FRAME_CAPACITY`] bytes each,
/// allocated once. Frames are parsed and rewritten in place and sent with [`crate::Port::send_burst`].
///
/// ```
/// use keyplane_net::Burst;
/// let mut b = Burst::new();
/// assert!(b.push(&[0u8; 60]));
/// b.frame_mut(0)[0] = 0xff;
/// assert_eq!(b.len(), 1);
/// assert_eq!(b.frame(0)[0], 0xff);
/// ```
pub struct Burst {
    buf: Box<[u8]>,
    lens: Box<[u16]>,
    count: usize,
}

impl Default for Burst {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Burst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Burst").field("len", &self.count).field("capacity", &self.capacity()).finish()
    }
}

impl Burst {
    /// A burst of [`BURST`] frames.
    pub fn new() -> Self {
        Self::with_capacity(BURST)
    }
    /// A burst of `capacity` frames (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Burst {
            buf: vec![0u8; capacity * FRAME_CAPACITY].into_boxed_slice(),
            lens: vec![0u16; capacity].into_boxed_slice(),
            count: 0,
        }
    }
    /// Most frames this burst holds.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }
    /// Frames held.
    pub fn len(&self) -> usize {
        self.count
    }
    /// No frames held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Forget all frames (buffers are kept).
    pub fn clear(&mut self) {
        self.count = 0;
    }
    /// Frame `i`. Panics if `i >= len()`, like slice indexing.
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let o = i * FRAME_CAPACITY;
        &self.buf[o..o + self.lens[i] as usize]
    }
    /// Frame `i`, mutable. Panics if `i >= len()`.
    pub fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let o = i * FRAME_CAPACITY;
        &mut self.buf[o..o + self.lens[i] as usize]
    }
    /// The whole [`FRAME_CAPACITY`]-byte buffer of frame `i` (for growing a frame, e.g. pushing a
    /// VLAN tag; then call [`set_frame_len`](Burst::set_frame_len)). Panics if `i >= len()`.
    pub fn buffer_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let o = i * FRAME_CAPACITY;
        &mut self.buf[o..o + FRAME_CAPACITY]
    }
    /// Set the length of frame `i`. Errors if `len > FRAME_CAPACITY`; panics if `i >= len()`.
    pub fn set_frame_len(&mut self, i: usize, len: usize) -> Result<()> {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        if len > FRAME_CAPACITY {
            return Err(Error::BufferTooSmall { need: len, have: FRAME_CAPACITY });
        }
        self.lens[i] = len as u16;
        Ok(())
    }
    /// Append a copy of `frame`. `false` (nothing appended) if the burst is full or the frame is
    /// longer than [`FRAME_CAPACITY`].
    pub fn push(&mut self, frame: &[u8]) -> bool {
        self.push_with(|buf| {
            if frame.len() > buf.len() {
                return 0;
            }
            buf[..frame.len()].copy_from_slice(frame);
            frame.len()
        })
    }
    /// Append a frame written in place by `build`, which gets the whole [`FRAME_CAPACITY`]-byte
    /// buffer and returns the frame length (0: nothing appended). `false` if the burst is full or
    /// nothing was appended. Pairs with the builders of [`crate::build`].
    pub fn push_with(&mut self, build: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if self.count == self.capacity() {
            return false;
        }
        let o = self.count * FRAME_CAPACITY;
        let n = build(&mut self.buf[o..o + FRAME_CAPACITY]).min(FRAME_CAPACITY);
        if n == 0 {
            return false;
        }
        self.lens[self.count] = n as u16;
        self.count += 1;
        true
    }
    /// Drop frame `i`, moving the last frame into its place (order is not kept). Panics if
    /// `i >= len()`.
    pub fn swap_remove(&mut self, i: usize) {
        assert!(i < self.count, "frame index {i} out of range (burst holds {})", self.count);
        let last = self.count - 1;
        if i != last {
            let (a, b) = self.buf.split_at_mut(last * FRAME_CAPACITY);
            let n = self.lens[last] as usize;
            a[i * FRAME_CAPACITY..i * FRAME_CAPACITY + n].copy_from_slice(&b[..n]);
            self.lens[i] = self.lens[last];
        }
        self.count = last;
    }
    /// The frames, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.count).map(move |i| self.frame(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_push_and_remove() {
        let mut b = Burst::with_capacity(3);
        assert!(b.push(&[1; 60]));
        assert!(b.push(&[2; 1514]));
        assert!(!b.push(&[3; FRAME_CAPACITY + 1]));
        assert!(b.push_with(|buf| {
            buf[..5].copy_from_slice(b"hello");
            5
        }));
        assert!(!b.push(&[4; 10]), "full");
        assert_eq!(b.iter().map(|f| f.len()).collect::<Vec<_>>(), vec![60, 1514, 5]);
        b.swap_remove(0);
        assert_eq!(b.frame(0), b"hello");
        assert_eq!(b.frame(1), &[2; 1514][..]);
        assert!(b.set_frame_len(0, FRAME_CAPACITY + 1).is_err());
        b.set_frame_len(0, 2).unwrap();
        assert_eq!(b.frame(0), b"he");
    }
}
