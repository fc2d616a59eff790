//! Exact packing of small batches: once repacking is done, when the claims it may move hold few
//! pods, the cheapest packing of those pods under the rules the plan follows is found by search,
//! and it replaces those claims when the plan it gives leaves fewer pods pending or costs less.
//!
//! Why: repacking (`repack.rs`, `mix.rs`, `rides.rs`) is a local search, and the exact-optimum
//! test (`tests/exact_optimum.rs`) finds small cases it leaves a few percent above the optimum:
//! exact fits first fit misses, pods of one pool riding on nodes that pods of another opened, and
//! with limits, which pods get a pool's last room. A batch of a few pods is what an event-driven
//! provisioner sees most often, and for it the exact answer is cheap.
//!
//! The rules are those `optimum.rs` judges plans by (with a MILP, in tests): pools in the plan's
//! order (weight, then name); a node is one type of one pool and holds what its type has free; a
//! pod rides on a node of any pool that runs it, but every node holds a pod that may open it
//! there — a pod opens nodes in the first pool that runs it, or in a later one only when every
//! earlier pool that runs it has limits and, with the nodes the search gave it, no room left for
//! any type that holds the pod. A node costs what the plan makes a claim cost: the cheapest spot
//! type that holds its pods within what its pool's limits leave, else the cheapest on-demand one.
//! In a pool with limits a node may be a dearer type than the cheapest that holds its pods (the
//! cheapest may take room a second node needs), but only one the plan keeps: a claim is launched
//! as the first type that fits beside the others, so the room the pool's limits leave at the end
//! must be too little for any cheaper type that holds the node's pods (the state's guards).
//!
//! The search is a dynamic program over the pools in order. Its state: the pods still to place,
//! counted per shape (pods with the same requests and the same fit in every pool are
//! interchangeable), which shapes may still open nodes, what the current pool's nodes take of its
//! limits, and their guards. At each state it opens one more node in the pool (any set of the pods left that
//! fits, with a pod that may open it) or moves to the next pool; it minimises the pods left
//! pending, then the cost. It runs only when the pods' counts make few states
//! ([`MAX_STATES`]), and gives up after [`MAX_STEPS`] steps, leaving the plan as repacking left
//! it. Consolidation's many simulations skip it: the pass's packing is enough to decide there.
//!
//! One rule beyond the optimum's: a pod whose first pool has taints stays on pools with taints
//! (capacity set aside for the pods that tolerate them, as `rides.rs` keeps it).
//!
//! In scope are the pods repacking may move (no topology, affinity, host ports or preferences to
//! relax) on new claims of pools without `minValues`, and pending pods of the same kind that a
//! pool's limits turned away; each pool's claims under one set of requirements; no cluster-wide
//! cost limit and no capacity reservations (counted across pools, beyond what the search models).

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::bins::Bin;
use super::finalize::{self, priced, PricedTypes};
use super::pools::undominated;
use super::repack::Shelf;
use super::Scheduler;
use crate::requirements::Requirements;
use crate::resources::Resources;

/// The most pods searched.
const MAX_PODS: usize = 24;
/// The most states of the pods' counts (the product of each shape's count plus one).
const MAX_STATES: usize = 4096;
/// The most steps (a set of pods, or a type for it, tried at a state) before the search gives up.
const MAX_STEPS: usize = 25_000;
/// The most types a node of a limited pool is tried as (the first in the plan's order).
const MAX_CHOICES: usize = 8;

/// Pods with the same requests and the same fit in every pool.
struct Shape {
    requests: Resources,
    class: usize,
    /// The pods, as indices into the snapshot's pods.
    pods: Vec<usize>,
    /// Bit `p` set: pool `p` (in the plan's order) runs the shape.
    runs: u64,
}

/// A pool as the search sees it.
struct Pool {
    reqs: Requirements,
    priced: Arc<PricedTypes>,
    /// Its limited resources, and what its limits leave beside the claims the search does not move.
    limits: Vec<(String, i64)>,
    /// Whether it has limits (a pool without them never leaves a pod free to open nodes later).
    limited: bool,
    /// The most of each resource any of its types has free: a set of pods past it fits no node.
    roomiest: Resources,
    /// Without limits, the types the plan could launch a claim as, cheapest first.
    shelf: Shelf,
    /// With limits, the types a node may be (index into the pool's types, price), in the plan's
    /// order, less those another beats on every count (see [`Search::new`]): the cheapest type
    /// that holds a node's pods may take room a second node needs, so each is a choice.
    choices: Vec<(usize, f64)>,
}

/// The search's state.
#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    /// The pool nodes open in (index into the plan's order).
    pool: usize,
    /// The pods left, per shape.
    counts: Vec<u8>,
    /// Bit per shape: whether its pods may still open nodes (see [`Search::next_pool`]).
    open: u64,
    /// What the pool's nodes take of each of its limits.
    used: Vec<i64>,
    /// What the pool's limits may leave free at most once the search moves on (see [`guards`]).
    guards: Vec<Vec<i64>>,
}

/// What a state leads to at best: pods left pending, cost per hour, and the first move.
#[derive(Clone)]
struct Best {
    pending: usize,
    cost: f64,
    step: Step,
}

#[derive(Clone)]
enum Step {
    /// No pool left.
    Done,
    /// On to the next pool.
    Next,
    /// A node of type `t` (index into the pool's types) holding `take` pods of each shape.
    Open { take: Vec<u8>, t: usize },
}

/// A node the search chose: pool, type, pods per shape.
type Node = (usize, usize, Vec<u8>);

struct Search<'s, 'a> {
    s: &'s Scheduler<'a>,
    shapes: Vec<Shape>,
    pools: Vec<Pool>,
    memo: HashMap<State, Best>,
    steps: usize,
}

impl Scheduler<'_> {
    /// Replaces the claims repacking may move by the exact packing of their pods (and of the
    /// pending pods of the same kind) when the batch is small and the plan gains by it.
    pub(super) fn pack_exactly(&mut self) {
        let Some((mut search, bins)) = Search::new(self) else { return };
        let Some((nodes, pending, cost)) = search.solve() else { return };
        // The claims as repacking left them, each at the price of its type (what the plan pays at
        // most for it): a search that gains nothing on that is not worth a plan to compare.
        let as_is: f64 = bins.iter().map(|&b| search.price_now(b)).sum();
        let pending_as_is = search.shapes.iter().flat_map(|sh| &sh.pods).filter(|&&p| self.is_pending(p)).count();
        if pending > pending_as_is || (pending == pending_as_is && cost >= as_is - 1e-9) {
            return;
        }
        let (shapes, pools) = (search.shapes, search.pools);
        // Judged by the plan each gives, as the plan prices and limits it.
        let before_plan = finalize::plan(self);
        let before = (self.bins.clone(), self.unschedulable.clone(), self.reserved(), self.cost_limited.clone());
        let added = self.bins.len();
        self.apply(&shapes, &pools, &bins, nodes);
        let after_plan = finalize::plan(self);
        let key = |p: &super::Plan| (p.unschedulable.len(), p.cost_per_hour);
        let (was, now) = (key(&before_plan), key(&after_plan));
        let gains = now.0 < was.0 || (now.0 == was.0 && now.1 < was.1 - 1e-9);
        if gains && self.kept_types(&after_plan, &bins, added) {
            return;
        }
        let (bins, unschedulable, reserved, cost_limited) = before;
        self.bins = bins;
        self.unschedulable = unschedulable;
        self.cost_limited = cost_limited;
        for (pool, r) in self.pools.iter_mut().zip(reserved) {
            pool.reserved = r;
        }
    }

    /// Whether the plan launches every node the search placed (on the moved claims `bins`, and on
    /// the claims added from index `added` on) as the type the search gave it. The search keeps
    /// only nodes the plan keeps (see `guards`); were one shrunk, a pool it counted as full
    /// would have room, and a pod opening a node past it would break the pools' order.
    fn kept_types(&self, plan: &super::Plan, bins: &[usize], added: usize) -> bool {
        let launched: HashMap<&str, &str> = plan
            .nodeclaims
            .iter()
            .flat_map(|c| c.pods.iter().map(move |p| (p.as_str(), c.instance_type.as_str())))
            .collect();
        let searched = bins.iter().copied().chain(added..self.bins.len());
        searched.filter(|&b| !self.bins[b].pods.is_empty()).all(|b| {
            let bin = &self.bins[b];
            let name = &self.catalog.types[self.pools[bin.pool].types[bin.target].catalog].name;
            launched.get(self.snap.pods[bin.pods[0]].key().as_str()) == Some(&name.as_str())
        })
    }

    fn is_pending(&self, pod: usize) -> bool {
        self.unschedulable.iter().any(|&(p, _)| p == pod)
    }

    fn reserved(&self) -> Vec<Resources> {
        self.pools.iter().map(|p| p.reserved.clone()).collect()
    }

    /// Puts the search's nodes on the claims it moves (and on new claims when there are more
    /// nodes), leaves pending the pods it places nowhere, and holds the nodes against the limits.
    fn apply(&mut self, shapes: &[Shape], pools: &[Pool], bins: &[usize], nodes: Vec<Node>) {
        let mut left: Vec<std::vec::IntoIter<usize>> = shapes.iter().map(|s| s.pods.clone().into_iter()).collect();
        let moved: Vec<usize> = shapes.iter().flat_map(|s| s.pods.iter().copied()).collect();
        self.unschedulable.retain(|(pod, _)| !moved.contains(pod));
        for &b in bins {
            let bin = &mut self.bins[b];
            bin.pods.clear();
            bin.used = Resources::default();
        }
        let mut slots = bins.iter().copied();
        for (p, t, take) in nodes {
            let mut on = Vec::new();
            let mut used = Resources::default();
            for (i, &n) in take.iter().enumerate() {
                for _ in 0..n {
                    on.push(left[i].next().expect("the search counted the pods"));
                    used.add(&shapes[i].requests);
                }
            }
            let free = self.pools[p].types[t].free.minus(&used);
            let bin = Bin {
                node: None,
                pool: p,
                target: t,
                reqs: pools[p].reqs.clone(),
                free,
                used,
                pods: on,
                ports: vec![],
                counts: vec![],
                // Read only while the pass fills claims.
                offers: vec![],
            };
            match slots.next() {
                Some(b) => self.bins[b] = bin,
                None => self.bins.push(bin),
            }
        }
        // What each limited pool's new claims hold, each at its type, as the pass counts it.
        let reserved = self.held_at_targets(|_| true);
        for (pool, r) in self.pools.iter_mut().zip(reserved) {
            if pool.remaining.is_some() {
                pool.reserved = r;
            }
        }
        for (i, shape) in shapes.iter().enumerate() {
            for pod in left[i].by_ref() {
                let reason = self.pending_reason(shape.class);
                self.unschedulable.push((pod, reason));
            }
        }
    }

    /// Why a pod of class `c` the search leaves pending has no place: each pool's reason, as
    /// opening a claim says it (a pool a cost limit refuses is told, as there).
    fn pending_reason(&mut self, c: usize) -> String {
        let mut reasons = Vec::new();
        for p in 0..self.pools.len() {
            let why = match self.fit_cached(c, 0, p) {
                Some(Err(e)) => e.clone(),
                Some(Ok(fit)) => {
                    let types: Vec<usize> = fit.types.iter().map(|&t| t as usize).collect();
                    self.limit_refusal(p, types).map_or_else(
                        || "its limits leave no room beside the pods planned there".to_string(),
                        |r| r.message,
                    )
                }
                None => continue,
            };
            reasons.push(format!("NodePool {:?}: {why}", self.pools[p].pool.name));
        }
        reasons.join("; ")
    }
}

impl<'s, 'a> Search<'s, 'a> {
    /// The search over the batch, with the claims it moves; `None` when the batch is out of scope
    /// or too large.
    fn new(s: &'s Scheduler<'a>) -> Option<(Self, Vec<usize>)> {
        if s.spend.is_limited() || !s.reservations_left.is_empty() {
            return None;
        }
        if s.pools.len() > 64 || s.pools.iter().any(|p| p.has_min_values) {
            return None;
        }
        let class_of = s.class_of();
        // Pods with one rung only: a pod placed with preferences relaxed is not one to move.
        let simple = |pod: usize| {
            let c = class_of[pod];
            c != usize::MAX && s.generic[c] && s.classes[c].levels.len() == 1
        };
        let bins: Vec<usize> = (0..s.bins.len()).filter(|&b| s.movable(b, &class_of, true)).collect();
        let mut pods: Vec<usize> = bins.iter().flat_map(|&b| s.bins[b].pods.iter().copied()).collect();
        if !pods.iter().all(|&p| simple(p)) {
            return None;
        }
        let tainted = (0..s.pools.len()).filter(|&p| !s.pools[p].pool.taints.is_empty()).fold(0u64, |r, p| r | 1 << p);
        let runs = |c: usize| -> u64 {
            let runs = (0..s.pools.len())
                .filter(|&p| matches!(s.fit_cached(c, 0, p), Some(Ok(_))))
                .fold(0u64, |r, p| r | 1 << p);
            // A pool with taints is capacity set aside for the pods that tolerate them (as rides
            // keep it, `rides.rs`): a pod at home there stays on such pools.
            let home = runs & runs.wrapping_neg();
            if home & tainted != 0 {
                runs & tainted
            } else {
                runs
            }
        };
        let pending: Vec<usize> =
            s.unschedulable.iter().map(|&(p, _)| p).filter(|&p| simple(p) && runs(class_of[p]) != 0).collect();
        // One pod alone is on the cheapest type of its first pool already.
        if (pods.len() < 2 && pending.is_empty()) || pods.len() + pending.len() > MAX_PODS {
            return None;
        }
        pods.extend(&pending);
        let mut shapes: Vec<Shape> = Vec::new();
        for &pod in &pods {
            let c = class_of[pod];
            match shapes.iter_mut().find(|sh| s.shape_of[sh.class] == s.shape_of[c]) {
                Some(sh) => sh.pods.push(pod),
                None => shapes.push(Shape {
                    requests: s.snap.pods[pod].requests.clone(),
                    class: c,
                    pods: vec![pod],
                    runs: runs(c),
                }),
            }
        }
        // Each state tries every set of the pods it has left (a step, and a step more for each type
        // the set is tried as): over all states of the counts, the product of (n + 1)(n + 2) / 2
        // sets per shape of n pods. Past the step budget the search would only give up.
        let states = shapes.iter().map(|sh| sh.pods.len() + 1).fold(1usize, usize::saturating_mul);
        let sets =
            shapes.iter().map(|sh| (sh.pods.len() + 1) * (sh.pods.len() + 2) / 2).fold(1usize, usize::saturating_mul);
        if states > MAX_STATES || sets.saturating_mul(2) > MAX_STEPS || shapes.len() > 64 {
            return None;
        }
        // What the claims that stay hold against the limits.
        let kept = s.held_at_targets(|b| !bins.contains(&b));
        // Each pool's one set of requirements: its fit for every shape it runs, and its claims'.
        let mut pools = Vec::new();
        for (p, kept) in kept.iter().enumerate() {
            let mut reqs: Option<&Requirements> = None;
            for sh in shapes.iter().filter(|sh| sh.runs & (1 << p) != 0) {
                let Some(Ok(fit)) = s.fit_cached(sh.class, 0, p) else { return None };
                if reqs.is_some_and(|r| *r != fit.reqs) {
                    return None;
                }
                reqs = Some(&fit.reqs);
            }
            if bins.iter().any(|&b| s.bins[b].pool == p && reqs.is_some_and(|r| *r != s.bins[b].reqs)) {
                return None;
            }
            let reqs = reqs.cloned().unwrap_or_default();
            let priced = priced(s, p, &reqs);
            let pool = &s.pools[p];
            let limits: Vec<(String, i64)> =
                pool.remaining.iter().flatten().map(|(n, left)| (n.clone(), left - kept.get(n))).collect();
            let roomiest =
                priced.0.iter().chain(&priced.1).fold(Resources::default(), |r, c| r.max(&pool.types[c.0].free));
            let choices = if pool.remaining.is_some() { choices(s, p, &priced, &limits) } else { vec![] };
            let shelf = Shelf::new(s, p, &priced);
            pools.push(Pool { reqs, priced, limits, limited: pool.remaining.is_some(), roomiest, shelf, choices });
        }
        let search = Search { s, shapes, pools, memo: HashMap::default(), steps: 0 };
        Some((search, bins))
    }

    /// What claim `b` costs as repacking left it: its type's price, in the plan's order (without
    /// limits the plan takes that type; with them, never a dearer one).
    fn price_now(&self, b: usize) -> f64 {
        let bin = &self.s.bins[b];
        let pool = &self.pools[bin.pool];
        if !pool.limited {
            if let Some((_, price)) = pool.shelf.choose(self.s, bin.pool, &bin.used) {
                return price;
            }
        }
        pool.priced.0.iter().chain(&pool.priced.1).find(|c| c.0 == bin.target).map_or(f64::INFINITY, |c| c.2)
    }

    /// The nodes of the best packing, with the pods it leaves pending and its cost, or `None` when
    /// the search gave up.
    fn solve(&mut self) -> Option<(Vec<Node>, usize, f64)> {
        let counts: Vec<u8> = self.shapes.iter().map(|sh| sh.pods.len() as u8).collect();
        let open = u64::MAX >> (64 - self.shapes.len());
        let mut state = State { pool: 0, counts, open, used: self.limits_free(0), guards: vec![] };
        let (pending, cost) = self.best(&state)?;
        let mut nodes = Vec::new();
        loop {
            match self.memo[&state].step.clone() {
                Step::Done => return Some((nodes, pending, cost)),
                Step::Next => state = self.next_pool(&state),
                Step::Open { take, t } => {
                    let p = state.pool;
                    let pool = &self.pools[p];
                    let guards = if pool.limited { guards(self.s, p, pool, &self.load(&take), t) } else { None };
                    state = self.opened(&state, &take, t, &guards.unwrap_or_default());
                    nodes.push((p, t, take));
                }
            }
        }
    }

    /// What `take` pods of each shape request together.
    fn load(&self, take: &[u8]) -> Resources {
        let mut load = Resources::default();
        for (sh, &n) in self.shapes.iter().zip(take) {
            for _ in 0..n {
                load.add(&sh.requests);
            }
        }
        load
    }

    /// Nothing taken of pool `p`'s limits yet.
    fn limits_free(&self, p: usize) -> Vec<i64> {
        self.pools.get(p).map_or_else(Vec::new, |pool| vec![0; pool.limits.len()])
    }

    /// The state once a node of type `t` holding `take` opens (`guards`: what it adds, see
    /// [`guards`]).
    fn opened(&self, state: &State, take: &[u8], t: usize, guards: &[Vec<i64>]) -> State {
        let capacity = &self.s.pools[state.pool].types[t].capacity;
        let limits = &self.pools[state.pool].limits;
        let mut next = state.clone();
        next.counts.iter_mut().zip(take).for_each(|(c, n)| *c -= n);
        next.used.iter_mut().zip(limits).for_each(|(u, (n, _))| *u += capacity.get(n));
        for g in guards {
            // Only the least of the guards matters: a slack short of it is short of the larger.
            if next.guards.iter().any(|h| h.iter().zip(g).all(|(a, b)| a <= b)) {
                continue;
            }
            next.guards.retain(|h| !g.iter().zip(h).all(|(a, b)| a <= b));
            next.guards.push(g.clone());
        }
        next.guards.sort();
        next
    }

    /// Whether the search may move on from `state`'s pool: what its limits leave free is short of
    /// every guard in some limited resource, so the plan keeps each node at the type the search
    /// gave it.
    fn may_move_on(&self, state: &State) -> bool {
        let limits = &self.pools[state.pool].limits;
        state
            .guards
            .iter()
            .all(|g| limits.iter().zip(&state.used).zip(g).any(|(((_, left), used), need)| left - used < *need))
    }

    /// The state once the search is done with the current pool: a shape the pool runs may open
    /// nodes later only if the pool has limits and no room left for a type that holds it.
    fn next_pool(&self, state: &State) -> State {
        let p = state.pool;
        let pool = &self.pools[p];
        let mut open = state.open;
        for (i, sh) in self.shapes.iter().enumerate() {
            if sh.runs & (1 << p) == 0 {
                continue;
            }
            let full = pool.limited
                && match self.s.fit_cached(sh.class, 0, p) {
                    Some(Ok(fit)) => fit.types.iter().all(|&t| {
                        let capacity = &self.s.pools[p].types[t as usize].capacity;
                        pool.limits.iter().zip(&state.used).any(|((n, left), u)| u + capacity.get(n) > *left)
                    }),
                    _ => true,
                };
            if !full {
                open &= !(1 << i);
            }
        }
        State { pool: p + 1, counts: state.counts.clone(), open, used: self.limits_free(p + 1), guards: vec![] }
    }

    /// The fewest pods left pending, then the least cost, from `state` on (kept in the memo with
    /// its first move; `usize::MAX` pending: no way on); `None` when the search gave up.
    fn best(&mut self, state: &State) -> Option<(usize, f64)> {
        if let Some(b) = self.memo.get(state) {
            return Some((b.pending, b.cost));
        }
        let p = state.pool;
        if p == self.pools.len() {
            let pending = state.counts.iter().map(|&c| c as usize).sum();
            self.memo.insert(state.clone(), Best { pending, cost: 0.0, step: Step::Done });
            return Some((pending, 0.0));
        }
        let (mut pending, mut cost, mut step) = (usize::MAX, f64::INFINITY, Step::Next);
        if self.may_move_on(state) {
            let next = self.next_pool(state);
            (pending, cost) = self.best(&next)?;
        }
        for take in self.sets(p, &state.counts) {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return None;
            }
            // A pod that may open the node here.
            let opens = self
                .shapes
                .iter()
                .enumerate()
                .any(|(i, sh)| take[i] > 0 && state.open & (1 << i) != 0 && sh.runs & (1 << p) != 0);
            if !opens {
                continue;
            }
            let load = self.load(&take);
            let pool = &self.pools[p];
            let types = &self.s.pools[p].types;
            let within = |t: usize| {
                let capacity = &types[t].capacity;
                pool.limits.iter().zip(&state.used).all(|((n, left), u)| u + capacity.get(n) <= *left)
            };
            // Without limits the cheapest type that holds the pods; with them, any that fits and
            // that the plan will keep (see `guards`).
            let options: Vec<(usize, f64, Vec<Vec<i64>>)> = if pool.limited {
                pool.choices
                    .iter()
                    .filter(|&&(t, _)| load.fits(&types[t].free) && within(t))
                    .filter_map(|&(t, price)| Some((t, price, guards(self.s, p, pool, &load, t)?)))
                    .collect()
            } else {
                pool.shelf.choose(self.s, p, &load).map(|(t, price)| (t, price, vec![])).into_iter().collect()
            };
            for (t, price, guards) in options {
                self.steps += 1;
                let after = self.opened(state, &take, t, &guards);
                let (more_pending, more) = self.best(&after)?;
                let total = price + more;
                if more_pending < pending || (more_pending == pending && total < cost - 1e-9) {
                    (pending, cost) = (more_pending, total);
                    step = Step::Open { take: take.clone(), t };
                }
            }
        }
        self.memo.insert(state.clone(), Best { pending, cost, step });
        Some((pending, cost))
    }

    /// Every non-empty set of the pods left (counts per shape) that pool `p` runs and whose
    /// requests fit within the most any of its types has free.
    fn sets(&self, p: usize, counts: &[u8]) -> Vec<Vec<u8>> {
        let roomiest = &self.pools[p].roomiest;
        let mut sets = Vec::new();
        let mut take = vec![0u8; counts.len()];
        self.extend_sets(p, counts, roomiest, 0, Resources::default(), &mut take, &mut sets);
        sets
    }

    #[allow(clippy::too_many_arguments)]
    fn extend_sets(
        &self,
        p: usize,
        counts: &[u8],
        roomiest: &Resources,
        i: usize,
        load: Resources,
        take: &mut Vec<u8>,
        sets: &mut Vec<Vec<u8>>,
    ) {
        if i == counts.len() {
            if take.iter().any(|&n| n > 0) {
                sets.push(take.clone());
            }
            return;
        }
        self.extend_sets(p, counts, roomiest, i + 1, load.clone(), take, sets);
        if self.shapes[i].runs & (1 << p) == 0 {
            return;
        }
        let mut load = load;
        for n in 1..=counts[i] {
            load.add(&self.shapes[i].requests);
            if !load.fits(roomiest) {
                break;
            }
            take[i] = n;
            self.extend_sets(p, counts, roomiest, i + 1, load.clone(), take, sets);
        }
        take[i] = 0;
    }
}

/// What a node of type `t` holding `load` in limited pool `p` needs of the pool's limits to stay
/// that type in the plan: the plan makes a claim the first type, in its order, that holds its
/// pods within what the limits leave beside the other claims. So for each type before `t` that
/// holds `load`, the limits must leave less free, in some resource, than that type takes beyond
/// `t` — a guard (the search moves on from the pool only when every guard holds). `None` when
/// such a type takes no more than `t` of any limit: the plan would always take it instead.
fn guards(s: &Scheduler<'_>, p: usize, pool: &Pool, load: &Resources, t: usize) -> Option<Vec<Vec<i64>>> {
    let types = &s.pools[p].types;
    let mut out = Vec::new();
    for c in pool.priced.0.iter().chain(&pool.priced.1) {
        if c.0 == t {
            break;
        }
        if !load.fits(&types[c.0].free) {
            continue;
        }
        let more: Vec<i64> =
            pool.limits.iter().map(|(n, _)| types[c.0].capacity.get(n) - types[t].capacity.get(n)).collect();
        if more.iter().all(|&m| m <= 0) {
            return None;
        }
        out.push(more);
    }
    Some(out)
}

/// The types a node of limited pool `p` may be, in the plan's order (spot first, then price),
/// each once, less those another beats on every count: no dearer, at least as much free, and no
/// more against any of the limits.
fn choices(s: &Scheduler<'_>, p: usize, priced: &PricedTypes, limits: &[(String, i64)]) -> Vec<(usize, f64)> {
    let types = &s.pools[p].types;
    let all: Vec<(usize, f64)> = priced.0.iter().chain(&priced.1).map(|c| (c.0, c.2)).collect();
    let beats = |a: usize, b: usize| {
        let (ta, tb) = (&types[all[a].0], &types[all[b].0]);
        all[a].1 <= all[b].1
            && tb.free.fits(&ta.free)
            && limits.iter().all(|(n, _)| ta.capacity.get(n) <= tb.capacity.get(n))
    };
    // A catalog's pool lists hundreds of types, of which the first few are wanted.
    undominated(all.len(), beats).take(MAX_CHOICES).map(|i| all[i]).collect()
}
