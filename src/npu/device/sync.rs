//! Events and notifies: what orders work across streams.
//!
//! An event counts its records. Issuing a record (host side) gives it the next
//! generation; the stream that runs the record completes that generation. A wait is
//! resolved when it is issued, to the latest generation issued so far, and waits until that
//! generation completes; waiting on an event with no record issued is an error
//! ([`NpuError::EventNotRecorded`]), since it would either wait forever or order nothing. A
//! record run by a stream that has faulted completes its generation *poisoned*: the waiter
//! gets [`NpuError::Upstream`] instead of silently computing on what the failed work left.
//!
//! A notify is a counting semaphore: each record releases exactly one wait, and a wait
//! blocks until a record is there to consume, whenever it was issued (Ascend's notifies
//! pair a record on one stream with a wait on another, often across model streams).
//!
//! Waits poll the device's shutdown flag, so dropping a device never leaves a worker
//! blocked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::error::NpuError;
use super::ids::EventId;

/// How often a blocked wait looks at the shutdown flag (shutdown also wakes it at once).
const SHUTDOWN_POLL: Duration = Duration::from_millis(50);

/// What [`super::Device::query_event`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStatus {
    /// No record was ever issued.
    NotRecorded,
    /// The latest record issued has not run yet.
    Pending,
    /// The latest record issued has run.
    Complete,
}

#[derive(Default)]
struct EventInner {
    issued: u64,
    done: u64,
    poison: Option<(u64, NpuError)>,
}

#[derive(Default)]
pub(crate) struct EventState {
    inner: Mutex<EventInner>,
    cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EventState {
    /// Issues a record: its generation.
    pub fn issue_record(&self) -> u64 {
        let mut g = lock(&self.inner);
        g.issued += 1;
        g.issued
    }

    /// The latest generation issued (0: none).
    pub fn latest(&self) -> u64 {
        lock(&self.inner).issued
    }

    /// A stream ran the record of `generation`; `poison` is its fault, if it had one.
    pub fn complete(&self, generation: u64, poison: Option<NpuError>) {
        let mut g = lock(&self.inner);
        g.done = g.done.max(generation);
        if let Some(e) = poison {
            g.poison = Some((generation, e));
        }
        drop(g);
        self.cv.notify_all();
    }

    /// Waits for `generation` to complete.
    pub fn wait(
        &self,
        id: EventId,
        generation: u64,
        shutdown: &AtomicBool,
    ) -> Result<(), NpuError> {
        let mut g = lock(&self.inner);
        while g.done < generation {
            if shutdown.load(Ordering::Acquire) {
                return Err(NpuError::DeviceLost);
            }
            g = self
                .cv
                .wait_timeout(g, SHUTDOWN_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        match &g.poison {
            Some((p, e)) if *p == generation => Err(NpuError::Upstream {
                event: id,
                source: Box::new(e.clone()),
            }),
            _ => Ok(()),
        }
    }

    pub fn status(&self) -> EventStatus {
        let g = lock(&self.inner);
        match (g.issued, g.done) {
            (0, _) => EventStatus::NotRecorded,
            (i, d) if d >= i => EventStatus::Complete,
            _ => EventStatus::Pending,
        }
    }

    pub fn wake(&self) {
        let _g = lock(&self.inner);
        self.cv.notify_all();
    }
}

#[derive(Default)]
pub(crate) struct NotifyState {
    count: Mutex<u64>,
    cv: Condvar,
}

impl NotifyState {
    pub fn record(&self) {
        *lock(&self.count) += 1;
        self.cv.notify_all();
    }

    pub fn wait(&self, shutdown: &AtomicBool) -> Result<(), NpuError> {
        let mut g = lock(&self.count);
        while *g == 0 {
            if shutdown.load(Ordering::Acquire) {
                return Err(NpuError::DeviceLost);
            }
            g = self
                .cv
                .wait_timeout(g, SHUTDOWN_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *g -= 1;
        Ok(())
    }

    pub fn wake(&self) {
        let _g = lock(&self.count);
        self.cv.notify_all();
    }
}
