//! The optimal one-to-one assignment of a type's candidate pairs: per connected group, by
//! Kuhn–Munkres over records when small, by successive shortest paths over classes when large,
//! and a bounded greedy method past `FLOW_WORK`.

use super::*;

/// The largest group, in record pairs (rows × columns), solved by Kuhn–Munkres over its
/// records as before classes existed; a larger one is solved over its classes.
pub(super) const DENSE_CELLS: usize = 4096;

/// The most fuzzy candidates one wanted class keeps in a large type (more than `DENSE_CELLS`
/// record pairs): its closest. Only a record with more candidates than this, all within the
/// threshold, can pair differently than the optimum would.
pub(super) const FUZZY_PER_CLASS: usize = 64;

/// The most work (augmenting paths × arcs) a group's exact min-cost flow may take; a group past
/// it is solved by the bounded method of [`flow`] instead (issue 58: a dense group of 2,000
/// fuzzy candidates each took 368 s by successive shortest paths).
pub(super) const FLOW_WORK: u64 = 20_000_000;

/// A pair is worth far more than any similarity: the most pairs first, then the closest.
pub(super) const PAIR: i128 = 1_000_000_000;

/// An exact pair is worth more than any number of fuzzy ones: exact pairs are made first (the
/// most of them there can be), then the most pairs, then the closest. A record extracted
/// exactly as expected is credited to that expected record, never traded for two near misses.
pub(super) const EXACT: i128 = 1_000_000_000_000_000_000_000_000;

/// The weight the assignment maximises for a pair of similarity `s`.
pub(super) fn weight(s: f64) -> i128 {
    let close = PAIR + (s * 1_000_000.0).round() as i128;
    if s >= 1.0 { EXACT + close } else { close }
}

/// The optimal one-to-one choice among candidate `edges` (wanted class, column class,
/// similarity) between the classes `rows` and `cols` (each its members, ascending): the most
/// exact pairs, then the most pairs, then the highest total similarity. Returns record pairs (a
/// member of each). Each connected group of candidates is solved on its own; a group of one
/// record pair needs no solving.
pub(super) fn assign(
    rows: &Classes,
    cols: &Classes,
    edges: &[(usize, usize, f64)],
) -> Vec<(usize, usize, f64)> {
    let n = rows.len();
    // Union-find over row classes 0..n and column classes n..n+k.
    let mut parent: Vec<usize> = (0..n + cols.len()).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for &(i, j, _) in edges {
        let (ri, rj) = (find(&mut parent, i), find(&mut parent, n + j));
        if ri != rj {
            parent[ri] = rj;
        }
    }
    let mut groups: BTreeMap<usize, Vec<(usize, usize, f64)>> = BTreeMap::new();
    for &edge in edges {
        let root = find(&mut parent, edge.0);
        groups.entry(root).or_default().push(edge);
    }
    let mut out = Vec::new();
    for group in groups.into_values() {
        if let [(i, j, s)] = group[..]
            && let ([x], [y]) = (rows.of(i), cols.of(j))
        {
            out.push((*x, *y, s));
            continue;
        }
        let mut r: Vec<usize> = group.iter().map(|e| e.0).collect();
        let mut c: Vec<usize> = group.iter().map(|e| e.1).collect();
        r.sort_unstable();
        r.dedup();
        c.sort_unstable();
        c.dedup();
        let records = |classes: &[usize], of: &Classes| -> usize {
            classes.iter().map(|&x| of.of(x).len()).sum()
        };
        if records(&r, rows).saturating_mul(records(&c, cols)) <= DENSE_CELLS {
            let pairs: Vec<(usize, usize, f64)> = group
                .iter()
                .flat_map(|&(i, j, s)| {
                    rows.of(i)
                        .iter()
                        .flat_map(move |&x| cols.of(j).iter().map(move |&y| (x, y, s)))
                })
                .collect();
            dense(&pairs, &mut out);
        } else {
            out.extend(flow(rows, cols, &r, &c, &group));
        }
    }
    out
}

/// One connected group of record pairs solved by Kuhn–Munkres (the assignment before issue 36,
/// with exact pairs first since issue 58).
pub(super) fn dense(group: &[(usize, usize, f64)], out: &mut Vec<(usize, usize, f64)>) {
    if let [only] = group {
        out.push(*only);
        return;
    }
    let mut rows: Vec<usize> = group.iter().map(|e| e.0).collect();
    let mut cols: Vec<usize> = group.iter().map(|e| e.1).collect();
    rows.sort_unstable();
    rows.dedup();
    cols.sort_unstable();
    cols.dedup();
    // Kuhn–Munkres needs no more rows than columns: solve the transposed problem if not.
    let transposed = rows.len() > cols.len();
    let (r, c) = if transposed {
        (&cols, &rows)
    } else {
        (&rows, &cols)
    };
    let mut weights = vec![0i128; r.len() * c.len()];
    let mut sims = vec![0f64; r.len() * c.len()];
    for &(i, j, s) in group {
        let (x, y) = if transposed { (j, i) } else { (i, j) };
        let (ri, ci) = (
            r.binary_search(&x).unwrap_or_default(),
            c.binary_search(&y).unwrap_or_default(),
        );
        weights[ri * c.len() + ci] = weight(s);
        sims[ri * c.len() + ci] = s;
    }
    let Ok(matrix) = pathfinding::matrix::Matrix::from_vec(r.len(), c.len(), weights.clone())
    else {
        return;
    };
    let (_, chosen) = pathfinding::kuhn_munkres::kuhn_munkres(&matrix);
    for (ri, ci) in chosen.into_iter().enumerate() {
        if weights[ri * c.len() + ci] == 0 {
            continue;
        }
        let s = sims[ri * c.len() + ci];
        out.push(if transposed {
            (c[ci], r[ri], s)
        } else {
            (r[ri], c[ci], s)
        });
    }
}

/// An arc of a flow network; arcs come in pairs, `a ^ 1` the reverse of `a`.
pub(super) struct Arc {
    pub(super) to: usize,
    pub(super) room: usize,
    pub(super) cost: i128,
}

/// A flow network over classes: source (node 0) → each row class (its size) → candidate column
/// classes → sink (node 1) (each column class's size).
pub(super) struct Network {
    pub(super) arcs: Vec<Arc>,
    pub(super) out_of: Vec<Vec<usize>>,
}

pub(super) const SOURCE: usize = 0;
pub(super) const SINK: usize = 1;

impl Network {
    pub(super) fn new(nodes: usize) -> Network {
        Network {
            arcs: Vec::new(),
            out_of: vec![Vec::new(); nodes],
        }
    }

    pub(super) fn add(&mut self, from: usize, to: usize, room: usize, cost: i128) -> usize {
        self.out_of[from].push(self.arcs.len());
        self.arcs.push(Arc { to, room, cost });
        self.out_of[to].push(self.arcs.len());
        self.arcs.push(Arc {
            to: from,
            room: 0,
            cost: -cost,
        });
        self.arcs.len() - 2
    }

    /// Send `units` along arc `a` (and take them back from its reverse).
    pub(super) fn push(&mut self, a: usize, units: usize) {
        self.arcs[a].room -= units;
        self.arcs[a ^ 1].room += units;
    }

    /// The units arc `a` carries.
    pub(super) fn carried(&self, a: usize) -> usize {
        self.arcs[a ^ 1].room
    }

    /// Raise the flow from source to sink to the most it can be (Dinic: shortest augmenting
    /// paths a level graph at a time), keeping what it carries already; costs play no part.
    pub(super) fn max_flow(&mut self) {
        let nodes = self.out_of.len();
        loop {
            let mut level = vec![usize::MAX; nodes];
            level[SOURCE] = 0;
            let mut queue = std::collections::VecDeque::from([SOURCE]);
            while let Some(u) = queue.pop_front() {
                for &a in &self.out_of[u] {
                    let arc = &self.arcs[a];
                    if arc.room > 0 && level[arc.to] == usize::MAX {
                        level[arc.to] = level[u] + 1;
                        queue.push_back(arc.to);
                    }
                }
            }
            if level[SINK] == usize::MAX {
                return;
            }
            let mut next = vec![0usize; nodes];
            // Blocking flow by depth-first search, iterative (no recursion on deep graphs).
            loop {
                let mut path: Vec<usize> = Vec::new();
                let mut u = SOURCE;
                let found = loop {
                    if u == SINK {
                        break true;
                    }
                    let mut advanced = false;
                    while next[u] < self.out_of[u].len() {
                        let a = self.out_of[u][next[u]];
                        let arc = &self.arcs[a];
                        if arc.room > 0 && level[arc.to] == level[u] + 1 {
                            path.push(a);
                            u = arc.to;
                            advanced = true;
                            break;
                        }
                        next[u] += 1;
                    }
                    if !advanced {
                        // A dead end: never tried again this round; step back.
                        level[u] = usize::MAX;
                        match path.pop() {
                            Some(a) => u = self.arcs[a ^ 1].to,
                            None => break false,
                        }
                    }
                };
                if !found {
                    break;
                }
                let units = path.iter().map(|&a| self.arcs[a].room).min().unwrap_or(0);
                for &a in &path {
                    self.push(a, units);
                }
            }
        }
    }

    /// The nodes that reach `from` (`backwards`) or that `from` reaches, over arcs with room.
    pub(super) fn reach(&self, from: usize, backwards: bool) -> Vec<bool> {
        let mut seen = vec![false; self.out_of.len()];
        seen[from] = true;
        let mut stack = vec![from];
        while let Some(u) = stack.pop() {
            for &a in &self.out_of[u] {
                // Forwards: arc `a` from u with room. Backwards: its reverse, into u, with room.
                let room = if backwards {
                    self.arcs[a ^ 1].room
                } else {
                    self.arcs[a].room
                };
                let v = self.arcs[a].to;
                if room > 0 && !seen[v] {
                    seen[v] = true;
                    stack.push(v);
                }
            }
        }
        seen
    }
}

/// Which classes may still take a fuzzy pair once exact pairs come first: a row class the most
/// exact pairs fill to its size in every way of making them has no record left for a fuzzy
/// pair in any optimal assignment, nor has such a column class (those reach no free place by
/// an alternating path: Dulmage–Mendelsohn). Every other class is open.
pub(super) struct Open {
    pub(super) rows: Vec<bool>,
    pub(super) cols: Vec<bool>,
}

impl Open {
    pub(super) fn of(rows: &Classes, cols: &Classes, exact: &[(usize, usize, f64)]) -> Open {
        let row_node = |i: usize| 2 + i;
        let col_node = |j: usize| 2 + rows.len() + j;
        let mut net = Network::new(2 + rows.len() + cols.len());
        let mut from_source = Vec::with_capacity(rows.len());
        for i in 0..rows.len() {
            from_source.push(net.add(SOURCE, row_node(i), rows.of(i).len(), 0));
        }
        let mut to_sink = Vec::with_capacity(cols.len());
        for j in 0..cols.len() {
            to_sink.push(net.add(col_node(j), SINK, cols.of(j).len(), 0));
        }
        // Greedily first (most exact graphs are one class to one class), then to the most.
        for &(i, j, _) in exact {
            let a = net.add(row_node(i), col_node(j), usize::MAX, 0);
            let units = net.arcs[from_source[i]].room.min(net.arcs[to_sink[j]].room);
            if units > 0 {
                net.push(from_source[i], units);
                net.push(a, units);
                net.push(to_sink[j], units);
            }
        }
        net.max_flow();
        let from = net.reach(SOURCE, false);
        let to = net.reach(SINK, true);
        Open {
            rows: (0..rows.len()).map(|i| from[row_node(i)]).collect(),
            cols: (0..cols.len()).map(|j| to[col_node(j)]).collect(),
        }
    }
}

/// One connected group of class pairs solved as a min-cost flow: source → each row class (its
/// size) → each candidate column class (cost −[`weight`]) → sink (its size), by successive
/// shortest paths (Dijkstra on reduced costs), stopped at the first path that gains nothing.
/// The most weight a b-matching of the classes can have is the most a matching of their
/// records can have (members of a class are interchangeable), so this is the optimum
/// Kuhn–Munkres finds over the records; the flow on each class pair is then dealt out to their
/// members in index order. `r`, `c`: the group's row and column classes, ascending.
///
/// A group whose flow would take more than [`FLOW_WORK`] is solved within a bound instead:
/// its pairs taken greedily, most weight first (exact pairs, then the closest), then the flow
/// raised to the most pairs by augmenting paths. That keeps the most pairs there can be and
/// takes exact pairs first, but the total similarity may fall short of the optimum.
pub(in crate::eval) fn flow(
    rows: &Classes,
    cols: &Classes,
    r: &[usize],
    c: &[usize],
    group: &[(usize, usize, f64)],
) -> Vec<(usize, usize, f64)> {
    let nodes = 2 + r.len() + c.len();
    let row_node = |i: usize| 2 + r.binary_search(&i).unwrap_or_default();
    let col_node = |j: usize| 2 + r.len() + c.binary_search(&j).unwrap_or_default();
    let mut net = Network::new(nodes);
    let mut from_source = HashMap::with_capacity(r.len());
    for &i in r {
        from_source.insert(i, net.add(SOURCE, row_node(i), rows.of(i).len(), 0));
    }
    let mut to_sink = HashMap::with_capacity(c.len());
    for &j in c {
        to_sink.insert(j, net.add(col_node(j), SINK, cols.of(j).len(), 0));
    }
    let mut pair_arcs: Vec<(usize, usize, f64, usize)> = group
        .iter()
        .map(|&(i, j, s)| {
            let room = rows.of(i).len().min(cols.of(j).len());
            (i, j, s, net.add(row_node(i), col_node(j), room, -weight(s)))
        })
        .collect();
    let records = |classes: &[usize], of: &Classes| -> u64 {
        classes.iter().map(|&x| of.of(x).len() as u64).sum()
    };
    let augmentations = records(r, rows).min(records(c, cols));
    if augmentations.saturating_mul(net.arcs.len() as u64) <= FLOW_WORK {
        shortest_paths(&mut net, &pair_arcs, r.len(), c.len());
    } else {
        let mut order: Vec<usize> = (0..pair_arcs.len()).collect();
        order.sort_by(|&x, &y| {
            let (a, b) = (&pair_arcs[x], &pair_arcs[y]);
            weight(b.2)
                .cmp(&weight(a.2))
                .then((a.0, a.1).cmp(&(b.0, b.1)))
        });
        for k in order {
            let (i, j, _, a) = pair_arcs[k];
            let (fs, ts) = (from_source[&i], to_sink[&j]);
            let units = net.arcs[fs]
                .room
                .min(net.arcs[a].room)
                .min(net.arcs[ts].room);
            if units > 0 {
                net.push(fs, units);
                net.push(a, units);
                net.push(ts, units);
            }
        }
        net.max_flow();
    }
    // Deal each class pair's flow out to the next members of both classes.
    pair_arcs.sort_by_key(|&(i, j, _, _)| (i, j));
    let mut next_row: HashMap<usize, usize> = HashMap::new();
    let mut next_col: HashMap<usize, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, j, s, a) in pair_arcs {
        let pairs = net.carried(a);
        let (x, y) = (
            next_row.entry(i).or_insert(0),
            next_col.entry(j).or_insert(0),
        );
        for _ in 0..pairs {
            if let (Some(&wi), Some(&aj)) = (rows.of(i).get(*x), cols.of(j).get(*y)) {
                out.push((wi, aj, s));
            }
            *x += 1;
            *y += 1;
        }
    }
    out
}

/// The min-cost flow of `net` (a group's network, its pair arcs `pair_arcs` from `rows` row
/// classes to `cols` column classes) by successive shortest paths.
pub(super) fn shortest_paths(
    net: &mut Network,
    pair_arcs: &[(usize, usize, f64, usize)],
    rows: usize,
    cols: usize,
) {
    let nodes = net.out_of.len();
    // Potentials that make every reduced cost non-negative: the shortest distances of the
    // initial network, a DAG whose only negative arcs go from rows to columns.
    let mut potential = vec![0i128; nodes];
    for &(_, _, _, a) in pair_arcs {
        let to = net.arcs[a].to;
        potential[to] = potential[to].min(net.arcs[a].cost);
    }
    potential[SINK] = (0..cols)
        .map(|x| potential[2 + rows + x])
        .min()
        .unwrap_or(0);
    const FAR: i128 = i128::MAX / 4;
    let mut distance = vec![FAR; nodes];
    let mut via: Vec<Option<usize>> = vec![None; nodes];
    loop {
        distance.fill(FAR);
        via.fill(None);
        distance[SOURCE] = 0;
        let mut queue = BinaryHeap::from([Reverse((0i128, SOURCE))]);
        while let Some(Reverse((d, u))) = queue.pop() {
            if d > distance[u] {
                continue;
            }
            for &a in &net.out_of[u] {
                let arc = &net.arcs[a];
                if arc.room == 0 {
                    continue;
                }
                let reduced = arc
                    .cost
                    .saturating_add(potential[u])
                    .saturating_sub(potential[arc.to])
                    .max(0);
                let next = d.saturating_add(reduced);
                if next < distance[arc.to] {
                    distance[arc.to] = next;
                    via[arc.to] = Some(a);
                    queue.push(Reverse((next, arc.to)));
                }
            }
        }
        if distance[SINK] >= FAR {
            break;
        }
        for (p, &d) in potential.iter_mut().zip(&distance) {
            if d < FAR {
                *p = p.saturating_add(d);
            }
        }
        // The path's true cost (the source's potential stays 0): no gain, no better flow.
        if potential[SINK] >= 0 {
            break;
        }
        let mut room = usize::MAX;
        let mut at = SINK;
        while let Some(a) = via[at] {
            room = room.min(net.arcs[a].room);
            at = net.arcs[a ^ 1].to;
        }
        let mut at = SINK;
        while let Some(a) = via[at] {
            net.push(a, room);
            at = net.arcs[a ^ 1].to;
        }
    }
}
