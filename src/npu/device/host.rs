//! Host staging memory: the buffers asynchronous copies read from and write to, from a
//! caching pool (the host placement's allocator).
//!
//! A [`HostBuf`] is shared: the handle the host holds and the one an asynchronous copy task
//! holds are clones of one reference-counted buffer. So a host-to-device copy never reads
//! host memory that was released before it ran: dropping the host's handle leaves the
//! task's, and the bytes go back to the pool only when the last handle is gone. A
//! device-to-host copy writes through its clone, and the host reads the result after
//! synchronizing. The bytes sit behind a lock, so a host that writes a buffer while a copy
//! reads it races (as on real hardware) but never corrupts memory.
//!
//! The pool rounds sizes up to a power of two (at least 64 bytes) and keeps released
//! buffers by size, so steady-state staging allocates nothing. Handed-out buffers are
//! zeroed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use crate::ops::Buffer;

/// Pinned-like host memory an asynchronous copy can use.
#[derive(Clone)]
pub struct HostBuf {
    inner: Arc<HostInner>,
}

struct HostInner {
    len: usize,
    data: RwLock<Buffer>,
    pool: Weak<HostPool>,
}

impl Drop for HostInner {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            let buf = std::mem::take(self.data.get_mut().unwrap_or_else(PoisonError::into_inner));
            pool.give_back(buf);
        }
    }
}

impl std::fmt::Debug for HostBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuf({} bytes)", self.inner.len)
    }
}

impl HostBuf {
    /// A buffer outside any pool, holding `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        HostBuf {
            inner: Arc::new(HostInner {
                len: bytes.len(),
                data: RwLock::new(Buffer::from_bytes(bytes)),
                pool: Weak::new(),
            }),
        }
    }
    pub fn len(&self) -> usize {
        self.inner.len
    }
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }
    /// Calls `f` with the bytes.
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let g = self
            .inner
            .data
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        f(&g.as_bytes()[..self.inner.len])
    }
    /// Calls `f` with the bytes, writable.
    pub fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut g = self
            .inner
            .data
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        f(&mut g.as_bytes_mut()[..self.inner.len])
    }
    /// A copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.with(<[u8]>::to_vec)
    }
    /// Overwrites the start of the buffer with `bytes` (at most its length).
    pub fn write(&self, bytes: &[u8]) {
        self.with_mut(|b| {
            let n = bytes.len().min(b.len());
            b[..n].copy_from_slice(&bytes[..n]);
        })
    }
    /// Whether this is the only handle: no task holds the buffer any more, so the host may
    /// rewrite it for the next copy.
    pub fn is_unique(&self) -> bool {
        Arc::strong_count(&self.inner) == 1
    }
    /// Whether two handles are the same buffer.
    pub fn same(&self, other: &HostBuf) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// Released staging buffers by capacity.
#[derive(Default)]
pub(crate) struct HostPool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    free: BTreeMap<usize, Vec<Buffer>>,
    in_use: u64,
    cached: u64,
}

fn class(len: usize) -> usize {
    len.max(64).next_power_of_two()
}

impl HostPool {
    pub fn alloc(self: &Arc<Self>, len: usize) -> HostBuf {
        let cap = class(len);
        let reused = {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.in_use += cap as u64;
            let b = s.free.get_mut(&cap).and_then(Vec::pop);
            if b.is_some() {
                s.cached -= cap as u64;
            }
            b
        };
        let data = match reused {
            Some(mut b) => {
                b.as_bytes_mut().fill(0);
                b
            }
            None => Buffer::zeroed(cap),
        };
        HostBuf {
            inner: Arc::new(HostInner {
                len,
                data: RwLock::new(data),
                pool: Arc::downgrade(self),
            }),
        }
    }

    fn give_back(&self, buf: Buffer) {
        let cap = buf.len();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.in_use -= cap as u64;
        s.cached += cap as u64;
        s.free.entry(cap).or_default().push(buf);
    }

    /// (bytes handed out, bytes cached)
    pub fn usage(&self) -> (u64, u64) {
        let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (s.in_use, s.cached)
    }

    /// Drops every cached buffer.
    pub fn trim(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.free.clear();
        s.cached = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_to_the_pool_when_the_last_handle_drops() {
        let pool = Arc::new(HostPool::default());
        let a = pool.alloc(100);
        a.write(&[7; 100]);
        let task_copy = a.clone();
        drop(a);
        assert_eq!(pool.usage(), (128, 0), "a task still holds it");
        assert_eq!(task_copy.to_vec(), vec![7; 100]);
        drop(task_copy);
        assert_eq!(pool.usage(), (0, 128));
        let b = pool.alloc(120);
        assert_eq!(pool.usage(), (128, 0), "reused");
        assert_eq!(b.to_vec(), vec![0; 120], "zeroed");
    }
}
