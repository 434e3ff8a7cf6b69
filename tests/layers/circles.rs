//! Circles in the module graph, for the layer guard (`tests/layers.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Breadth-first search from `from` along `graph` (inside `within` if
/// given): every reached module with the module it was reached from.
fn bfs(
    graph: &BTreeMap<String, BTreeSet<String>>,
    from: &str,
    within: Option<&BTreeSet<String>>,
) -> Vec<(String, String)> {
    let (mut seen, mut order, mut queue) = (
        BTreeSet::new(),
        Vec::new(),
        VecDeque::from([from.to_string()]),
    );
    while let Some(m) = queue.pop_front() {
        for n in graph.get(&m).into_iter().flatten() {
            if within.map_or(true, |w| w.contains(n)) && seen.insert(n.clone()) {
                order.push((n.clone(), m.clone()));
                queue.push_back(n.clone());
            }
        }
    }
    order
}

/// One `circle: a -> b -> a` line per strongly connected group of
/// modules: the shortest loop through its lowest module (by `place`, a
/// module's row and position in it), and the whole group where the loop
/// leaves some out.
pub fn circles(
    graph: &BTreeMap<String, BTreeSet<String>>,
    place: &HashMap<&str, (usize, usize)>,
) -> Vec<String> {
    let reach: BTreeMap<&String, BTreeSet<String>> = graph
        .keys()
        .map(|m| (m, bfs(graph, m, None).into_iter().map(|(n, _)| n).collect()))
        .collect();
    let mut groups = BTreeSet::new();
    for (m, r) in &reach {
        let group: BTreeSet<String> = r
            .iter()
            .filter(|n| reach.get(n).is_some_and(|back| back.contains(*m)))
            .cloned()
            .collect();
        if group.len() > 1 {
            groups.insert(group);
        }
    }
    let mut out = Vec::new();
    for group in groups {
        let Some(start) = group
            .iter()
            .min_by_key(|m| place.get(m.as_str()).copied().unwrap_or((usize::MAX, 0)))
        else {
            continue;
        };
        let order = bfs(graph, start, Some(&group));
        let parent: HashMap<&String, &String> = order.iter().map(|(n, p)| (n, p)).collect();
        // The first module reached that imports `start` closes the loop.
        let Some((last, _)) = order
            .iter()
            .find(|(n, _)| graph.get(n).is_some_and(|s| s.contains(start)))
        else {
            continue;
        };
        let mut lap = vec![start.clone()];
        let mut m = last;
        while m != start {
            lap.insert(1, m.clone());
            m = parent.get(m).copied().unwrap_or(start);
        }
        lap.push(start.clone());
        let mut text = format!("circle: {}", lap.join(" -> "));
        if group.len() + 1 > lap.len() {
            let all: Vec<&str> = group.iter().map(String::as_str).collect();
            text += &format!(" (the group: {})", all.join(", "));
        }
        out.push(text);
    }
    out
}
