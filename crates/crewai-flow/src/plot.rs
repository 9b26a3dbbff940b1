//! Drawing a flow: mermaid text and a self-contained HTML page (inline SVG, no scripts, no CDN).
//!
//! Both are drawn from the same graph: one node per method, one node per `and` join, an edge from
//! each method a trigger names (through the join, for `and`), and an edge labelled with the label
//! from each router (or feedback method) to the listeners of that label.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::definition::{MethodInfo, MethodKind};
use crate::runtime::Flow;
use crate::state::FlowState;
use crate::trigger::Trigger;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeShape {
    Start,
    ConditionalStart,
    Listen,
    Router,
    Join,
}

#[derive(Debug, Clone)]
struct Node {
    id: String,
    title: String,
    shape: NodeShape,
    feedback: bool,
}

#[derive(Debug, Clone)]
struct Edge {
    from: usize,
    to: usize,
    label: Option<String>,
}

#[derive(Debug, Default)]
struct Graph {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
}

impl Graph {
    fn from_methods(methods: &[MethodInfo<'_>]) -> Graph {
        let mut graph = Graph::default();
        let mut by_name = BTreeMap::new();
        for (i, m) in methods.iter().enumerate() {
            let shape = match (m.kind, m.trigger) {
                (MethodKind::Start, None) => NodeShape::Start,
                (MethodKind::Start, Some(_)) => NodeShape::ConditionalStart,
                (MethodKind::Listen, _) => NodeShape::Listen,
                (MethodKind::Router, _) => NodeShape::Router,
            };
            let shape = if shape == NodeShape::Listen && !m.labels.is_empty() {
                NodeShape::Router
            } else {
                shape
            };
            graph.nodes.push(Node {
                id: format!("m{i}"),
                title: m.name.to_string(),
                shape,
                feedback: m.human_feedback.is_some(),
            });
            by_name.insert(m.name, i);
        }
        let mut producers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, m) in methods.iter().enumerate() {
            for label in m.labels {
                producers.entry(label.as_str()).or_default().push(i);
            }
        }
        for (i, m) in methods.iter().enumerate() {
            if let Some(trigger) = m.trigger {
                graph.connect(trigger, i, &by_name, &producers);
            }
        }
        graph
    }

    fn connect(
        &mut self,
        trigger: &Trigger,
        target: usize,
        methods: &BTreeMap<&str, usize>,
        producers: &BTreeMap<&str, Vec<usize>>,
    ) {
        match trigger {
            Trigger::On(name) => {
                if let Some(&from) = methods.get(name.as_str()) {
                    self.edges.push(Edge {
                        from,
                        to: target,
                        label: None,
                    });
                }
                for &from in producers.get(name.as_str()).into_iter().flatten() {
                    self.edges.push(Edge {
                        from,
                        to: target,
                        label: Some(name.clone()),
                    });
                }
            }
            Trigger::Or(parts) => parts
                .iter()
                .for_each(|part| self.connect(part, target, methods, producers)),
            Trigger::And(parts) => {
                let join = self.nodes.len();
                self.nodes.push(Node {
                    id: format!("j{join}"),
                    title: "and".into(),
                    shape: NodeShape::Join,
                    feedback: false,
                });
                parts
                    .iter()
                    .for_each(|part| self.connect(part, join, methods, producers));
                self.edges.push(Edge {
                    from: join,
                    to: target,
                    label: None,
                });
            }
        }
    }

    /// A rank per node: the longest path from a start, ignoring edges that close a cycle.
    fn ranks(&self) -> (Vec<usize>, Vec<bool>) {
        let n = self.nodes.len();
        let mut back = vec![false; self.edges.len()];
        let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
        let roots: Vec<usize> = (0..n)
            .filter(|&i| self.nodes[i].shape == NodeShape::Start)
            .chain(0..n)
            .collect();
        for root in roots {
            if state[root] != 0 {
                continue;
            }
            // Iterative DFS: (node, next edge index to look at).
            let mut stack = vec![(root, 0usize)];
            state[root] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                match (*next..self.edges.len()).find(|&e| self.edges[e].from == node) {
                    Some(e) => {
                        *next = e + 1;
                        let to = self.edges[e].to;
                        match state[to] {
                            0 => {
                                state[to] = 1;
                                stack.push((to, 0));
                            }
                            1 => back[e] = true,
                            _ => {}
                        }
                    }
                    None => {
                        state[node] = 2;
                        stack.pop();
                    }
                }
            }
        }
        let mut rank = vec![0usize; n];
        for _ in 0..n {
            let mut changed = false;
            for (e, edge) in self.edges.iter().enumerate() {
                if !back[e] && rank[edge.to] < rank[edge.from] + 1 {
                    rank[edge.to] = rank[edge.from] + 1;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        (rank, back)
    }
}

fn mermaid_text(text: &str) -> String {
    text.replace('"', "#quot;")
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const NODE_WIDTH: f64 = 170.0;
const NODE_HEIGHT: f64 = 52.0;
const COLUMN_GAP: f64 = 50.0;
const ROW_GAP: f64 = 80.0;
const MARGIN: f64 = 40.0;

impl<S: FlowState> Flow<S> {
    /// The flow as a mermaid `flowchart`: starts are stadiums (conditional ones drawn the same but
    /// styled apart), listeners rectangles, routers rhombi, joins circles; label edges carry the label.
    pub fn to_mermaid(&self) -> String {
        let graph = Graph::from_methods(&self.methods());
        let mut out = String::from("flowchart TD\n");
        for node in &graph.nodes {
            let title = mermaid_text(&node.title);
            let line = match node.shape {
                NodeShape::Start | NodeShape::ConditionalStart => {
                    format!("{}([\"{title}\"])", node.id)
                }
                NodeShape::Listen => format!("{}[\"{title}\"]", node.id),
                NodeShape::Router => format!("{}{{\"{title}\"}}", node.id),
                NodeShape::Join => format!("{}((\"and\"))", node.id),
            };
            let _ = writeln!(out, "    {line}");
        }
        for edge in &graph.edges {
            let (from, to) = (&graph.nodes[edge.from].id, &graph.nodes[edge.to].id);
            let _ = match &edge.label {
                Some(label) => writeln!(out, "    {from} -->|\"{}\"| {to}", mermaid_text(label)),
                None => writeln!(out, "    {from} --> {to}"),
            };
        }
        let classes = [
            ("start", NodeShape::Start, "fill:#d1fae5,stroke:#059669"),
            (
                "conditionalStart",
                NodeShape::ConditionalStart,
                "fill:#ecfdf5,stroke:#059669,stroke-dasharray:4 3",
            ),
            ("listen", NodeShape::Listen, "fill:#dbeafe,stroke:#2563eb"),
            ("router", NodeShape::Router, "fill:#ffedd5,stroke:#ea580c"),
            ("join", NodeShape::Join, "fill:#f3e8ff,stroke:#7c3aed"),
        ];
        for (class, shape, style) in classes {
            let members: Vec<&str> = graph
                .nodes
                .iter()
                .filter(|n| n.shape == shape)
                .map(|n| n.id.as_str())
                .collect();
            if !members.is_empty() {
                let _ = writeln!(out, "    classDef {class} {style}");
                let _ = writeln!(out, "    class {} {class}", members.join(","));
            }
        }
        out
    }

    /// A self-contained HTML page drawing the flow as inline SVG (starts green, listeners blue,
    /// routers orange with their labels on the edges, `and` joins purple, cycles dashed), with the
    /// mermaid text beneath.
    pub fn plot_html(&self) -> String {
        let graph = Graph::from_methods(&self.methods());
        let (rank, back) = graph.ranks();
        let rows = rank.iter().copied().max().map_or(0, |r| r + 1);
        let mut layers: Vec<Vec<usize>> = vec![Vec::new(); rows];
        for (node, &r) in rank.iter().enumerate() {
            layers[r].push(node);
        }
        let widest = layers.iter().map(Vec::len).max().unwrap_or(1).max(1) as f64;
        let width = MARGIN * 2.0 + widest * NODE_WIDTH + (widest - 1.0) * COLUMN_GAP + 120.0;
        let height =
            MARGIN * 2.0 + rows as f64 * NODE_HEIGHT + (rows.saturating_sub(1)) as f64 * ROW_GAP;
        let mut position = vec![(0.0, 0.0); graph.nodes.len()];
        for (r, layer) in layers.iter_mut().enumerate() {
            // Order each row by where its parents sit (fewer crossings); declaration order breaks ties.
            if r > 0 {
                let parent_x = |node: usize| {
                    let xs: Vec<f64> = graph
                        .edges
                        .iter()
                        .enumerate()
                        .filter(|(e, edge)| edge.to == node && !back[*e])
                        .map(|(_, edge)| position[edge.from].0)
                        .collect();
                    if xs.is_empty() {
                        f64::MAX
                    } else {
                        xs.iter().sum::<f64>() / xs.len() as f64
                    }
                };
                layer.sort_by(|a, b| parent_x(*a).total_cmp(&parent_x(*b)).then(a.cmp(b)));
            }
            let row_width = layer.len() as f64 * NODE_WIDTH
                + (layer.len().saturating_sub(1)) as f64 * COLUMN_GAP;
            let left = (width - 120.0 - row_width) / 2.0;
            for (column, &node) in layer.iter().enumerate() {
                let x = left + column as f64 * (NODE_WIDTH + COLUMN_GAP) + NODE_WIDTH / 2.0;
                let y = MARGIN + r as f64 * (NODE_HEIGHT + ROW_GAP) + NODE_HEIGHT / 2.0;
                position[node] = (x, y);
            }
        }

        let mut svg = String::new();
        let _ = write!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"flow {}\">\n\
             <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#475569\"/></marker></defs>\n",
            html_escape(self.name())
        );
        for (e, edge) in graph.edges.iter().enumerate() {
            let (x1, y1) = position[edge.from];
            let (x2, y2) = position[edge.to];
            let (path, label_at) = if back[e] || y2 <= y1 {
                // A cycle leaves the source's bottom, runs up the right margin and enters the target's side.
                let out = width - 50.0;
                let below = y1 + NODE_HEIGHT / 2.0;
                (
                    format!(
                        "M{x1:.1},{below:.1} C{x1:.1},{:.1} {out:.1},{:.1} {out:.1},{:.1} S{out:.1},{y2:.1} {:.1},{y2:.1}",
                        below + 30.0,
                        below + 30.0,
                        (below + y2) / 2.0,
                        x2 + NODE_WIDTH / 2.0
                    ),
                    (out - 10.0, (y1 + y2) / 2.0),
                )
            } else {
                let (start, end) = (y1 + NODE_HEIGHT / 2.0, y2 - NODE_HEIGHT / 2.0);
                let middle = (start + end) / 2.0;
                (
                    format!(
                        "M{x1:.1},{start:.1} C{x1:.1},{middle:.1} {x2:.1},{middle:.1} {x2:.1},{end:.1}"
                    ),
                    ((x1 + x2) / 2.0, middle),
                )
            };
            let dash = if back[e] {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            let _ = writeln!(
                svg,
                "<path class=\"edge\" d=\"{path}\" fill=\"none\" stroke=\"#475569\" stroke-width=\"1.6\"{dash} marker-end=\"url(#arrow)\"/>"
            );
            if let Some(label) = &edge.label {
                let text_width = 8.0 + 7.0 * label.chars().count() as f64;
                let _ = writeln!(
                    svg,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{text_width:.1}\" height=\"18\" rx=\"4\" fill=\"#fff7ed\" stroke=\"#ea580c\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"label\">{}</text>",
                    label_at.0 - text_width / 2.0,
                    label_at.1 - 9.0,
                    label_at.0,
                    label_at.1 + 4.0,
                    html_escape(label)
                );
            }
        }
        for (node, &(x, y)) in graph.nodes.iter().zip(&position) {
            let (left, top) = (x - NODE_WIDTH / 2.0, y - NODE_HEIGHT / 2.0);
            let shape = match node.shape {
                NodeShape::Start => format!(
                    "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{NODE_WIDTH}\" height=\"{NODE_HEIGHT}\" rx=\"26\" fill=\"#d1fae5\" stroke=\"#059669\" stroke-width=\"2\"/>"
                ),
                NodeShape::ConditionalStart => format!(
                    "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{NODE_WIDTH}\" height=\"{NODE_HEIGHT}\" rx=\"26\" fill=\"#ecfdf5\" stroke=\"#059669\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>"
                ),
                NodeShape::Listen => format!(
                    "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{NODE_WIDTH}\" height=\"{NODE_HEIGHT}\" rx=\"6\" fill=\"#dbeafe\" stroke=\"#2563eb\" stroke-width=\"2\"/>"
                ),
                NodeShape::Router => format!(
                    "<polygon points=\"{x:.1},{top:.1} {:.1},{y:.1} {x:.1},{:.1} {left:.1},{y:.1}\" fill=\"#ffedd5\" stroke=\"#ea580c\" stroke-width=\"2\"/>",
                    left + NODE_WIDTH,
                    top + NODE_HEIGHT
                ),
                NodeShape::Join => format!(
                    "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"22\" fill=\"#f3e8ff\" stroke=\"#7c3aed\" stroke-width=\"2\"/>"
                ),
            };
            let kind = match node.shape {
                NodeShape::Start => "start",
                NodeShape::ConditionalStart => "conditional start",
                NodeShape::Listen => "listen",
                NodeShape::Router => "router",
                NodeShape::Join => "",
            };
            let kind = if node.feedback {
                format!("{kind} · human feedback")
            } else {
                kind.to_string()
            };
            let _ = writeln!(
                svg,
                "<g class=\"node\" id=\"{}\"><title>{}</title>{shape}",
                node.id,
                html_escape(&node.title)
            );
            if node.shape == NodeShape::Join {
                let _ = writeln!(
                    svg,
                    "<text x=\"{x:.1}\" y=\"{:.1}\" class=\"join\">AND</text></g>",
                    y + 4.0
                );
            } else {
                let _ = writeln!(
                    svg,
                    "<text x=\"{x:.1}\" y=\"{:.1}\" class=\"name\">{}</text><text x=\"{x:.1}\" y=\"{:.1}\" class=\"kind\">{}</text></g>",
                    y - 2.0,
                    html_escape(&node.title),
                    y + 14.0,
                    html_escape(&kind)
                );
            }
        }
        svg.push_str("</svg>");

        let title = html_escape(self.name());
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title} · crewai flow</title>\n<style>\n\
             body {{ font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 24px; color: #0f172a; background: #f8fafc; }}\n\
             .legend span {{ display: inline-block; margin-right: 16px; padding: 2px 10px; border-radius: 10px; border: 2px solid; font-size: 13px; }}\n\
             svg {{ background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; margin-top: 12px; }}\n\
             text {{ text-anchor: middle; font-size: 14px; }}\n text.kind {{ font-size: 11px; fill: #475569; }}\n text.label {{ font-size: 12px; fill: #9a3412; }}\n\
             text.join {{ font-size: 11px; font-weight: 600; fill: #5b21b6; }}\n pre {{ background: #fff; border: 1px solid #e2e8f0; padding: 12px; border-radius: 8px; }}\n\
             </style>\n</head>\n<body>\n<h1>{title}</h1>\n<div class=\"legend\">\
             <span style=\"border-color:#059669;background:#d1fae5\">start</span>\
             <span style=\"border-color:#2563eb;background:#dbeafe\">listen</span>\
             <span style=\"border-color:#ea580c;background:#ffedd5\">router (labels on edges)</span>\
             <span style=\"border-color:#7c3aed;background:#f3e8ff\">and-join</span>\
             <span style=\"border-color:#475569\">dashed edge: cycle</span></div>\n{svg}\n\
             <details><summary>Mermaid</summary><pre>{}</pre></details>\n</body>\n</html>\n",
            html_escape(&self.to_mermaid())
        )
    }
}
