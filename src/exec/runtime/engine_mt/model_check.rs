//! Model checking of the scheduler's synchronization with shuttle: the very scheduler of
//! [`super::sched`], instantiated with shuttle's atomics, threads and park/unpark, runs
//! small graphs under many random and PCT schedules. Each kernel checks, when it runs,
//! that its predecessors (and a gated Free's related launches) completed, that it runs
//! once, and that no other node of its class (whichever participant runs it, the class's
//! own or one that borrowed it) or of its critical section runs; shuttle fails the test
//! on a deadlock (every thread blocked), a panic, or a lost worker. A participant parks
//! until an unpark gives it its token ([`Parker`]), so a wake-up the scheduler loses is
//! a deadlock here (with shuttle's own park, which may return spuriously, it was not:
//! the checks passed with the push's unpark removed).

use std::sync::atomic::Ordering::SeqCst;

use shuttle::sync::atomic::{AtomicBool, AtomicU32};

use super::sched::{
    CLASS_MASK, FREE_REL, Failure, LAUNCH, LAUNCH_REL, MEMORY, NORMAL, Pool, Prims, SECTION_SHIFT,
    Shape, Work,
};

struct ShuttlePrims;

shuttle::thread_local! {
    /// This thread's park token (see [`Parker`]).
    static TOKEN: std::cell::RefCell<Option<std::sync::Arc<AtomicBool>>> =
        std::cell::RefCell::new(None);
}

fn my_token() -> std::sync::Arc<AtomicBool> {
    TOKEN.with(|t| {
        t.borrow_mut()
            .get_or_insert_with(|| std::sync::Arc::new(AtomicBool::new(false)))
            .clone()
    })
}

/// A thread with a park token of its own: `park` returns only once an `unpark` gave the
/// token (shuttle's own park may return spuriously at any time, as std's may, which
/// would hide a lost wake-up: a participant nobody unparked would still run on). A
/// wake-up the scheduler loses then leaves its participant parked for good, and shuttle
/// reports the deadlock.
#[derive(Clone)]
struct Parker {
    thread: shuttle::thread::Thread,
    token: std::sync::Arc<AtomicBool>,
}

impl Prims for ShuttlePrims {
    type U32 = AtomicU32;
    type Thread = Parker;
    type Join = shuttle::thread::JoinHandle<()>;
    const SPINS: u32 = 2;
    /// Time plays no part under shuttle: the waits are bounded by the steps.
    type Clock = ();
    fn clock() {}
    fn spun_out(_: ()) -> bool {
        false
    }
    fn current() -> Parker {
        Parker {
            thread: shuttle::thread::current(),
            token: my_token(),
        }
    }
    fn park() {
        let token = my_token();
        while !token.swap(false, SeqCst) {
            shuttle::thread::park();
        }
    }
    fn unpark(t: &Parker) {
        t.token.store(true, SeqCst);
        t.thread.unpark()
    }
    fn spin() {
        shuttle::thread::yield_now()
    }
    fn relax() {
        shuttle::thread::yield_now()
    }
    fn spawn(name: &'static str, f: impl FnOnce() + Send + 'static) -> (Parker, Self::Join) {
        let token = std::sync::Arc::new(AtomicBool::new(false));
        let mine = token.clone();
        let j = shuttle::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                TOKEN.with(|t| *t.borrow_mut() = Some(mine));
                f()
            })
            .expect("spawn");
        let thread = j.thread().clone();
        (Parker { thread, token }, j)
    }
    fn join(j: Self::Join) {
        j.join().expect("a worker panicked");
    }
}

/// A toy graph: nodes `(class, section, predecessors)` and relations `(free, launch)`.
struct Toy {
    meta: Vec<u32>,
    preds: Vec<Vec<u32>>,
    succ_off: Vec<u32>,
    succ: Vec<u32>,
    indegree: Vec<u32>,
    starts: Vec<u32>,
    launches_of: Vec<Vec<u32>>,
    frees_of: Vec<Vec<u32>>,
    gated: Vec<u32>,
    fail_at: Option<u32>,
    runs: Vec<AtomicU32>,
    in_section: Vec<AtomicU32>,
    /// Per class: whether a node of it is running (a class's nodes never run at once,
    /// on its own participant or on one that borrowed the class).
    in_class: [AtomicU32; 3],
}

impl Toy {
    fn new(nodes: &[(u32, u32, &[u32])], relations: &[(u32, u32)]) -> Toy {
        let n = nodes.len();
        let mut meta: Vec<u32> = nodes
            .iter()
            .map(|&(c, s, _)| c | (s << SECTION_SHIFT))
            .collect();
        let preds: Vec<Vec<u32>> = nodes.iter().map(|&(_, _, p)| p.to_vec()).collect();
        let mut succ_off = vec![0u32];
        let mut succ = Vec::new();
        for i in 0..n as u32 {
            succ.extend((0..n as u32).filter(|&j| preds[j as usize].contains(&i)));
            succ_off.push(succ.len() as u32);
        }
        let indegree: Vec<u32> = preds.iter().map(|p| p.len() as u32).collect();
        let starts = (0..n as u32)
            .filter(|&i| indegree[i as usize] == 0)
            .collect();
        let mut launches_of = vec![Vec::new(); n];
        let mut frees_of = vec![Vec::new(); n];
        for &(f, l) in relations {
            launches_of[f as usize].push(l);
            frees_of[l as usize].push(f);
            meta[f as usize] |= FREE_REL;
            meta[l as usize] |= LAUNCH_REL;
        }
        let gated = (0..n as u32)
            .filter(|&f| !launches_of[f as usize].is_empty())
            .collect();
        let sections = nodes.iter().map(|&(_, s, _)| s).max().unwrap_or(0);
        Toy {
            meta,
            preds,
            succ_off,
            succ,
            indegree,
            starts,
            launches_of,
            frees_of,
            gated,
            fail_at: None,
            runs: (0..n).map(|_| AtomicU32::new(0)).collect(),
            in_section: (0..sections).map(|_| AtomicU32::new(0)).collect(),
            in_class: [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)],
        }
    }

    fn shape(&self) -> Shape {
        let mut per_class = [0; 3];
        for m in &self.meta {
            per_class[(m & CLASS_MASK) as usize] += 1;
        }
        Shape {
            nodes: self.meta.len() as u32,
            per_class,
            sections: self.in_section.len() as u32,
        }
    }

    fn reset(&self) {
        for r in &self.runs {
            r.store(0, SeqCst);
        }
    }

    fn ran(&self, i: u32) -> bool {
        self.runs[i as usize].load(SeqCst) == 1
    }
}

impl Work for Toy {
    type Error = u32;
    fn succ(&self, id: u32) -> &[u32] {
        &self.succ[self.succ_off[id as usize] as usize..self.succ_off[id as usize + 1] as usize]
    }
    fn related_frees(&self, id: u32) -> &[u32] {
        &self.frees_of[id as usize]
    }
    fn related_launches(&self, id: u32) -> &[u32] {
        &self.launches_of[id as usize]
    }
    fn meta(&self, id: u32) -> u32 {
        self.meta[id as usize]
    }
    fn indegree(&self) -> &[u32] {
        &self.indegree
    }
    fn starts(&self) -> &[u32] {
        &self.starts
    }
    fn gated(&self) -> &[u32] {
        &self.gated
    }
    fn sinks(&self) -> u32 {
        (0..self.meta.len() as u32)
            .filter(|&i| self.succ(i).is_empty())
            .count() as u32
    }
    unsafe fn run(&self, id: u32) -> Result<(), u32> {
        let i = id as usize;
        for &p in &self.preds[i] {
            assert!(self.ran(p), "node {id} runs before its predecessor {p}");
        }
        for &l in &self.launches_of[i] {
            assert!(self.ran(l), "Free {id} runs before its related launch {l}");
        }
        let class = &self.in_class[(self.meta[i] & CLASS_MASK) as usize];
        assert_eq!(
            class.swap(1, SeqCst),
            0,
            "two nodes of class {} at once",
            self.meta[i] & CLASS_MASK
        );
        shuttle::thread::yield_now();
        class.store(0, SeqCst);
        let section = self.meta[i] >> SECTION_SHIFT;
        if section != 0 {
            let s = &self.in_section[section as usize - 1];
            assert_eq!(
                s.swap(1, SeqCst),
                0,
                "critical section {section} entered twice"
            );
            shuttle::thread::yield_now();
            s.store(0, SeqCst);
        }
        if self.fail_at == Some(id) {
            return Err(id);
        }
        assert_eq!(self.runs[i].fetch_add(1, SeqCst), 0, "node {id} ran twice");
        Ok(())
    }
}

/// Runs `toy` three times on one pool: with a failure at each node in turn (when
/// `failures`), then clean; a clean run runs every node exactly once.
fn exercise(mut toy: Toy, failures: bool) {
    let mut pool: Pool<ShuttlePrims, Toy> = Pool::new(toy.shape());
    let n = toy.meta.len() as u32;
    let fail = if failures { random_u32() % n } else { n };
    for round in 0..2 {
        toy.reset();
        toy.fail_at = (round == 0 && fail < n).then_some(fail);
        match pool.execute(&toy) {
            Ok(()) => {
                assert!(toy.fail_at.is_none(), "the failure at {fail} was lost");
                for i in 0..n {
                    assert!(toy.ran(i), "node {i} never ran");
                }
                for &f in &toy.gated {
                    assert!(pool.free_executed(f));
                }
            }
            Err(Failure::Error(id, e)) => {
                assert_eq!((Some(id), e), (toy.fail_at, fail));
            }
            Err(Failure::Panic(p)) => std::panic::resume_unwind(p),
        }
    }
}

/// A value from shuttle's per-schedule randomness (replayable with the schedule).
fn random_u32() -> u32 {
    use shuttle::rand::RngCore;
    shuttle::rand::thread_rng().next_u32()
}

fn diamond() -> Toy {
    Toy::new(
        &[
            (NORMAL, 0, &[]),
            (MEMORY, 0, &[0]),
            (LAUNCH, 0, &[0]),
            (NORMAL, 0, &[1, 2]),
        ],
        &[],
    )
}

/// Alloc -> launches reading it; the Free of the block depends on the alloc only and is
/// gated on both launches; a second Free (a start node) is gated on one of them.
fn free_launch() -> Toy {
    Toy::new(
        &[
            (MEMORY, 0, &[]),     // 0 alloc
            (LAUNCH, 0, &[0]),    // 1 launch reads 0
            (NORMAL, 0, &[0]),    // 2 normal
            (LAUNCH, 0, &[2]),    // 3 launch reads 0 after 2
            (MEMORY, 0, &[0]),    // 4 Free of 0, gated on 1 and 3
            (MEMORY, 0, &[]),     // 5 Free gated on 3
            (MEMORY, 0, &[4, 1]), // 6 after the Free
        ],
        &[(4, 1), (4, 3), (5, 3)],
    )
}

fn sections() -> Toy {
    Toy::new(
        &[
            (MEMORY, 1, &[]),
            (LAUNCH, 1, &[]),
            (NORMAL, 1, &[]),
            (NORMAL, 0, &[]),
            (LAUNCH, 1, &[3]),
        ],
        &[],
    )
}

/// Fan-outs within and across classes: several nodes of one class made ready at once
/// (one runs next, the rest are queued while its class may be borrowed), and joins.
fn fan() -> Toy {
    Toy::new(
        &[
            (NORMAL, 0, &[]),     // 0
            (MEMORY, 0, &[0]),    // 1
            (MEMORY, 0, &[0]),    // 2
            (LAUNCH, 0, &[0]),    // 3
            (LAUNCH, 0, &[1]),    // 4
            (NORMAL, 0, &[2, 3]), // 5
            (MEMORY, 0, &[4, 5]), // 6
            (NORMAL, 0, &[4]),    // 7
            (LAUNCH, 0, &[]),     // 8 a start of another class
        ],
        &[],
    )
}

const ITERATIONS: usize = 2000;

#[test]
fn diamond_random() {
    shuttle::check_random(|| exercise(diamond(), false), ITERATIONS);
}

#[test]
fn diamond_pct() {
    shuttle::check_pct(|| exercise(diamond(), true), ITERATIONS, 3);
}

#[test]
fn free_launch_random() {
    shuttle::check_random(|| exercise(free_launch(), false), ITERATIONS);
}

#[test]
fn free_launch_pct() {
    shuttle::check_pct(|| exercise(free_launch(), false), ITERATIONS, 3);
}

#[test]
fn failures_random() {
    shuttle::check_random(|| exercise(free_launch(), true), ITERATIONS);
}

#[test]
fn failures_pct() {
    shuttle::check_pct(|| exercise(free_launch(), true), ITERATIONS, 3);
}

#[test]
fn critical_sections_random() {
    shuttle::check_random(|| exercise(sections(), true), ITERATIONS);
}

#[test]
fn fan_random() {
    shuttle::check_random(|| exercise(fan(), true), ITERATIONS);
}

#[test]
fn fan_pct() {
    shuttle::check_pct(|| exercise(fan(), true), ITERATIONS, 3);
}
