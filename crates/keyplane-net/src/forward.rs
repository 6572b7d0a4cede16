//! In-place forwarding: [`Port::forward_burst`](crate::Port::forward_burst) lends a burst of
//! received frames, each in a buffer with room in front ([`FwdFrame`]), to a closure that rewrites
//! them in place (and may grow them at the front, e.g. for an IP-in-IP header) and gives each a
//! [`Verdict`]. On AF_XDP the frames stay in their UMEM chunks and a transmitted frame's chunk goes
//! straight from the RX ring to the TX ring: no copy in user space. Other back ends copy each
//! frame once into a [`FwdScratch`] the caller allocated once.

use crate::Burst;
use crate::port::FRAME_CAPACITY;

/// Most frames one [`forward_burst`](crate::Port::forward_burst) call lends at once.
pub const FWD_MAX: usize = 64;

/// Bytes of room in front of each frame of a [`FwdScratch`]: the kernel's `XDP_PACKET_HEADROOM`,
/// which is also where AF_XDP copy mode places received data in a UMEM chunk.
pub const FWD_HEADROOM: usize = 256;

/// What happens to a frame after [`forward_burst`](crate::Port::forward_burst)'s closure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// Discard it (the default).
    #[default]
    Drop,
    /// Transmit it, as rewritten, on the port it came from.
    Transmit,
    /// Copy it into the slow-path burst of the [`FwdScratch`] for the caller to handle later.
    Slow,
}

/// One received frame, lent in place with the buffer around it.
///
/// The frame is `buffer[head..head + len]`; [`grow_front`](FwdFrame::grow_front) moves `head`
/// back into the room in front (or shifts the frame when there is not enough).
#[derive(Debug, Default)]
pub struct FwdFrame<'a> {
    buf: &'a mut [u8],
    head: usize,
    len: usize,
    /// What to do with the frame once the closure returns ([`Verdict::Drop`] unless set).
    pub verdict: Verdict,
}

impl<'a> FwdFrame<'a> {
    /// A frame at `buf[head..head + len]` (clamped to the buffer), verdict [`Verdict::Drop`].
    pub fn new(buf: &'a mut [u8], head: usize, len: usize) -> Self {
        let head = head.min(buf.len());
        let len = len.min(buf.len() - head);
        FwdFrame { buf, head, len, verdict: Verdict::Drop }
    }
    /// The frame's bytes.
    #[inline]
    pub fn frame(&self) -> &[u8] {
        &self.buf[self.head..self.head + self.len]
    }
    /// The frame's bytes, mutable.
    #[inline]
    pub fn frame_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.head..self.head + self.len]
    }
    /// Frame length.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for an empty frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes free in front of the frame.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.head
    }
    /// Offset of the frame in its buffer.
    #[inline]
    pub fn head(&self) -> usize {
        self.head
    }
    /// Most bytes the frame can hold (buffer size, minus nothing: grown frames may use the room in
    /// front and behind).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
    /// Prepend `n` bytes (their content is unspecified: the caller writes them). Uses the room
    /// in front; without enough, shifts the frame towards the end of its buffer. `false` (frame
    /// unchanged) if the grown frame would not fit in the buffer.
    #[inline]
    pub fn grow_front(&mut self, n: usize) -> bool {
        if n <= self.head {
            self.head -= n;
            self.len += n;
            return true;
        }
        let new_len = self.len + n;
        if new_len > self.buf.len() {
            return false;
        }
        // Not enough room in front: move the frame so that it ends at the new end.
        let shift = n - self.head;
        self.buf.copy_within(self.head..self.head + self.len, self.head + shift);
        self.head = 0;
        self.len = new_len;
        true
    }
    /// Set the frame length (shrink, or grow at the end). `false` (unchanged) if it would not fit.
    #[inline]
    pub fn set_len(&mut self, len: usize) -> bool {
        if self.head + len > self.buf.len() {
            return false;
        }
        self.len = len;
        true
    }
}

/// What one [`forward_burst`](crate::Port::forward_burst) call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forwarded {
    /// Frames received and lent to the closure.
    pub rx: usize,
    /// Frames with [`Verdict::Transmit`] queued for transmission.
    pub tx: usize,
    /// Frames with [`Verdict::Transmit`] the port could not queue (TX ring full, too long,
    /// empty); counted in [`crate::PortStats::tx_dropped`] too.
    pub tx_failed: usize,
    /// Frames with [`Verdict::Slow`] copied into the slow-path burst.
    pub slow: usize,
    /// Frames with [`Verdict::Slow`] that did not fit in the slow-path burst (dropped).
    pub slow_dropped: usize,
}

/// Caller-owned buffers for [`forward_burst`](crate::Port::forward_burst), allocated once: the
/// slow-path burst, and for back ends without in-place forwarding one buffer of
/// [`FWD_HEADROOM`] + [`FRAME_CAPACITY`] bytes per frame.
pub struct FwdScratch {
    frames: Frames,
    /// Frames given [`Verdict::Slow`] by the last call (cleared at the start of each call).
    pub slow: Burst,
}

/// The copy back ends' frame buffers.
pub(crate) struct Frames {
    buf: Box<[u8]>,
    lens: Vec<usize>,
}

impl std::fmt::Debug for FwdScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FwdScratch").field("frames", &self.capacity()).field("slow", &self.slow).finish()
    }
}

impl Default for FwdScratch {
    fn default() -> Self {
        Self::new(FWD_MAX)
    }
}

const SLOT: usize = FWD_HEADROOM + FRAME_CAPACITY;

impl FwdScratch {
    /// Room for `frames` frames per call (1 to [`FWD_MAX`]) and as many slow-path frames.
    pub fn new(frames: usize) -> Self {
        let n = frames.clamp(1, FWD_MAX);
        FwdScratch {
            frames: Frames { buf: vec![0u8; n * SLOT].into_boxed_slice(), lens: Vec::with_capacity(n) },
            slow: Burst::with_capacity(n),
        }
    }
    /// Most frames lent per call.
    pub fn capacity(&self) -> usize {
        self.frames.buf.len() / SLOT
    }
    pub(crate) fn clear(&mut self) {
        self.frames.lens.clear();
        self.slow.clear();
    }
    pub(crate) fn len(&self) -> usize {
        self.frames.lens.len()
    }
    /// Append a copy of a received frame (copy back ends). `false` if full or too long.
    pub(crate) fn push(&mut self, frame: &[u8]) -> bool {
        let i = self.frames.lens.len();
        if i >= self.capacity() || frame.len() > FRAME_CAPACITY {
            return false;
        }
        let o = i * SLOT + FWD_HEADROOM;
        self.frames.buf[o..o + frame.len()].copy_from_slice(frame);
        self.frames.lens.push(frame.len());
        true
    }
    pub(crate) fn parts(&mut self) -> (&mut Frames, &mut Burst) {
        (&mut self.frames, &mut self.slow)
    }
}

impl Frames {
    /// Lend the copied frames to `f`, then give (frame, verdict) pairs to `done` in order.
    pub(crate) fn lend(&mut self, f: &mut dyn FnMut(&mut [FwdFrame<'_>]), done: &mut dyn FnMut(&[u8], Verdict)) {
        let n = self.lens.len();
        let mut frames: [FwdFrame<'_>; FWD_MAX] = std::array::from_fn(|_| FwdFrame::default());
        for ((slot, buf), &len) in frames.iter_mut().zip(self.buf.chunks_exact_mut(SLOT)).zip(&self.lens) {
            *slot = FwdFrame::new(buf, FWD_HEADROOM, len);
        }
        f(&mut frames[..n]);
        for fr in &frames[..n] {
            done(fr.frame(), fr.verdict);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grow_front_uses_headroom_then_shifts() {
        let mut buf = [0u8; 64];
        buf[10..14].copy_from_slice(b"abcd");
        let mut f = FwdFrame::new(&mut buf, 10, 4);
        assert_eq!(f.frame(), b"abcd");
        assert!(f.grow_front(6));
        assert_eq!((f.head(), f.len()), (4, 10));
        assert_eq!(&f.frame()[6..], b"abcd");
        // 8 more: only 4 in front, so the frame moves.
        assert!(f.grow_front(8));
        assert_eq!((f.head(), f.len()), (0, 18));
        assert_eq!(&f.frame()[14..], b"abcd");
        assert!(!f.grow_front(47), "would not fit in 64 bytes");
        assert_eq!(f.len(), 18);
        assert!(f.grow_front(46));
        assert_eq!(&f.frame()[60..], b"abcd");
        assert!(f.set_len(3));
        assert!(!f.set_len(65));
        let mut short = [0u8; 4];
        let g = FwdFrame::new(&mut short, 9, 9);
        assert_eq!((g.head(), g.len()), (4, 0), "clamped to the buffer");
    }

    #[test]
    fn scratch_lends_copies_with_headroom() {
        let mut s = FwdScratch::new(3);
        assert!(s.push(&[1; 60]));
        assert!(s.push(&[2; 1514]));
        assert!(!s.push(&[3; FRAME_CAPACITY + 1]));
        assert!(s.push(&[4; 70]));
        assert!(!s.push(&[5; 10]), "full");
        let mut seen = Vec::new();
        s.parts().0.lend(
            &mut |fs| {
                assert_eq!(fs.len(), 3);
                assert!(fs.iter().all(|f| f.headroom() == FWD_HEADROOM));
                fs[0].verdict = Verdict::Transmit;
                assert!(fs[1].grow_front(40));
                fs[1].frame_mut()[..40].fill(9);
                fs[1].verdict = Verdict::Slow;
            },
            &mut |f, v| seen.push((f.len(), f[0], v)),
        );
        assert_eq!(seen, vec![(60, 1, Verdict::Transmit), (1554, 9, Verdict::Slow), (70, 4, Verdict::Drop)]);
    }
}
