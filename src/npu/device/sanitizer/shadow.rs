//! Shadow memory: what the sanitizer knows of each allocation's bytes. One [`Block`] per
//! allocation, from the allocation until the next allocation over its bytes (so a task
//! issued before a free and run after it is still checked): which bytes were written
//! since the allocation (one bit per byte) and who touched which bytes last, with the
//! lane clock of each access, for the race check.

use std::sync::Arc;

use super::clock::{Clock, Lane};
use super::report::{AllocEvent, TaskInfo};

/// Access records one block keeps before it forgets its oldest (a block touched in many
/// partial, unordered ranges; whole-tensor accesses prune each other and stay few).
const MAX_RECORDS: usize = 256;

/// What a task's access is to its bytes, for messages.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Role {
    Input(usize),
    Output(usize),
    /// A copy's source, a conditional task's value.
    Read,
    /// A copy's or memset's destination, a value written at a model's start.
    Write,
}

impl Role {
    pub(crate) fn writes(self) -> bool {
        matches!(self, Role::Output(_) | Role::Write)
    }
    pub(crate) fn name(self) -> String {
        match self {
            Role::Input(i) => format!("input {i}"),
            Role::Output(i) => format!("output {i}"),
            Role::Read => "source".into(),
            Role::Write => "destination".into(),
        }
    }
}

/// One access to a range of a block, as the race check keeps it.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    /// Byte offsets in the block, `lo..hi`.
    pub lo: u64,
    pub hi: u64,
    pub lane: Lane,
    /// The lane's epoch at the access.
    pub epoch: u32,
    pub write: bool,
    /// What the access was to the task (its input 0, a copy's source), for messages.
    pub role: Role,
    pub task: Arc<TaskInfo>,
}

/// One allocation's shadow.
pub(crate) struct Block {
    /// Bytes the allocation asked for.
    pub size: u64,
    /// One bit per byte: written since the allocation.
    written: Vec<u64>,
    records: Vec<Record>,
    /// Its allocation and, once freed, its free.
    pub history: Vec<AllocEvent>,
    pub freed: bool,
}

impl Block {
    pub fn new(size: u64, alloc: AllocEvent) -> Block {
        Block {
            size,
            written: vec![0; size.div_ceil(64) as usize],
            records: Vec::new(),
            history: vec![alloc],
            freed: false,
        }
    }

    /// Marks bytes `lo..hi` written.
    pub fn mark_written(&mut self, lo: u64, hi: u64) {
        let hi = hi.min(self.size);
        let mut i = lo;
        while i < hi {
            let (word, bit) = ((i / 64) as usize, i % 64);
            // A whole word at once where the range covers it.
            if bit == 0 && hi - i >= 64 {
                self.written[word] = u64::MAX;
                i += 64;
            } else {
                self.written[word] |= 1 << bit;
                i += 1;
            }
        }
    }

    /// The first byte of `lo..hi` not written since the allocation.
    pub fn first_unwritten(&self, lo: u64, hi: u64) -> Option<u64> {
        let hi = hi.min(self.size);
        let mut i = lo;
        while i < hi {
            let (word, bit) = ((i / 64) as usize, i % 64);
            let w = self.written[word];
            if bit == 0 && hi - i >= 64 {
                if w != u64::MAX {
                    return Some(i + u64::from((!w).trailing_zeros()));
                }
                i += 64;
            } else {
                if w & (1 << bit) == 0 {
                    return Some(i);
                }
                i += 1;
            }
        }
        None
    }

    /// Checks an access of `lo..hi` by `lane` at `clock` against the block's records and
    /// keeps it: the first earlier access it conflicts with (overlapping bytes, one of the
    /// two writing, the earlier not ordered before this one) is returned.
    pub fn access(
        &mut self,
        lo: u64,
        hi: u64,
        lane: Lane,
        clock: &Clock,
        role: Role,
        task: &Arc<TaskInfo>,
    ) -> Option<Record> {
        let write = role.writes();
        let conflict = self
            .records
            .iter()
            .find(|r| {
                r.lo < hi
                    && lo < r.hi
                    && (write || r.write)
                    && r.lane != lane
                    && !clock.has_seen(r.lane, r.epoch)
            })
            .cloned();
        // What this access covers and follows needs keeping no longer: a later access
        // that is ordered after this one is ordered after those too, and one that is not
        // conflicts with this one wherever it would with them. An earlier write stays
        // when this access only reads: a later read that races it races no read.
        self.records.retain(|r| {
            !(clock.has_seen(r.lane, r.epoch) && lo <= r.lo && r.hi <= hi && (write || !r.write))
        });
        if self.records.len() >= MAX_RECORDS {
            self.records.remove(0);
        }
        self.records.push(Record {
            lo,
            hi,
            lane,
            epoch: clock.get(lane),
            write,
            role,
            task: task.clone(),
        });
        conflict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(size: u64) -> Block {
        Block::new(
            size,
            AllocEvent {
                what: "alloc",
                bytes: Some(size),
                stream: 0,
                thread: "t".into(),
                after: None,
                serial: 1,
            },
        )
    }

    #[test]
    fn written_bits_find_the_first_gap() {
        let mut b = block(300);
        assert_eq!(b.first_unwritten(0, 300), Some(0));
        b.mark_written(0, 130);
        assert_eq!(b.first_unwritten(0, 300), Some(130));
        assert_eq!(b.first_unwritten(3, 130), None);
        b.mark_written(131, 300);
        assert_eq!(b.first_unwritten(0, 300), Some(130));
        assert_eq!(b.first_unwritten(131, 300), None);
        b.mark_written(130, 131);
        assert_eq!(b.first_unwritten(0, 300), None);
        // Beyond the block: clipped, as the memcheck reports those.
        assert_eq!(b.first_unwritten(290, 400), None);
    }

    #[test]
    fn unordered_write_and_read_conflict_ordered_ones_do_not() {
        let task = Arc::new(TaskInfo {
            lane: "stream 0".into(),
            kind: "kernel launch",
            op: Some("Add".into()),
            label: None,
        });
        let mut b = block(1024);
        let mut c0 = Clock::default();
        c0.tick(0);
        assert!(b.access(0, 512, 0, &c0, Role::Output(0), &task).is_none());
        // Lane 1 has not seen lane 0's write: a read of an overlapping range races.
        let mut c1 = Clock::default();
        c1.tick(1);
        let r = b
            .access(256, 300, 1, &c1, Role::Input(0), &task)
            .expect("a race");
        assert_eq!((r.lane, r.lo, r.hi, r.write), (0, 0, 512, true));
        // Disjoint bytes never race; reads never race reads.
        assert!(
            b.access(512, 1024, 1, &c1, Role::Output(0), &task)
                .is_none()
        );
        let mut c2 = Clock::default();
        c2.tick(2);
        c2.join(&c0);
        assert!(
            b.access(600, 700, 2, &c2, Role::Input(0), &task).is_some(),
            "lane 1 wrote 512..1024"
        );
        // Once lane 2 has seen lane 1 too, its write is ordered after everything.
        c2.join(&c1);
        c2.tick(2);
        assert!(b.access(0, 1024, 2, &c2, Role::Output(0), &task).is_none());
        assert_eq!(
            b.records.len(),
            1,
            "the covering write replaced what it follows"
        );
    }
}
