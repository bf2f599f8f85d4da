//! A keyspace's replication (Cassandra's `schema.ReplicationParams`): the
//! option map as the user wrote it (stored in `system_schema.keyspaces`,
//! shown by DESCRIBE) and the strategy it names, parsed once when the
//! keyspace is defined or loaded.

use std::collections::BTreeMap;

/// A replication strategy with its factors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationStrategy {
    /// `LocalStrategy`: the data of each node stays on that node (system).
    Local,
    /// `SimpleStrategy`: `rf` distinct nodes walking the ring clockwise.
    Simple { replication_factor: usize },
    /// `NetworkTopologyStrategy`: a factor per data center.
    NetworkTopology {
        datacenters: BTreeMap<String, usize>,
    },
    /// `EverywhereStrategy`: every node.
    Everywhere,
}

impl ReplicationStrategy {
    /// Parses a replication option map (class names long or short). Unknown
    /// classes and unparsable factors were refused by validation; what is
    /// stored is read leniently (a bad factor counts as 0).
    pub fn parse(options: &BTreeMap<String, String>) -> ReplicationStrategy {
        let class = options.get("class").map(String::as_str).unwrap_or("");
        let short = class.rsplit('.').next().unwrap_or(class);
        // (`3/1` keeps its transient part after the slash; `+3` is 3)
        let factor = |v: &String| {
            let all = v.split('/').next().unwrap_or("").trim();
            all.strip_prefix('+')
                .unwrap_or(all)
                .parse::<usize>()
                .unwrap_or(0)
        };
        match short {
            "LocalStrategy" => ReplicationStrategy::Local,
            "EverywhereStrategy" => ReplicationStrategy::Everywhere,
            "NetworkTopologyStrategy" => ReplicationStrategy::NetworkTopology {
                datacenters: options
                    .iter()
                    .filter(|(k, _)| k.as_str() != "class")
                    .map(|(k, v)| (k.clone(), factor(v)))
                    .collect(),
            },
            _ => ReplicationStrategy::Simple {
                replication_factor: options.get("replication_factor").map_or(1, factor),
            },
        }
    }

    /// The total replication factor (the sum over data centers); 1 for
    /// `LocalStrategy`; for `EverywhereStrategy`, `nodes`.
    pub fn replication_factor(&self, nodes: usize) -> usize {
        match self {
            ReplicationStrategy::Local => 1,
            ReplicationStrategy::Everywhere => nodes,
            ReplicationStrategy::Simple { replication_factor } => *replication_factor,
            ReplicationStrategy::NetworkTopology { datacenters } => datacenters.values().sum(),
        }
    }

    /// The replication factor in data center `dc` (the whole factor for
    /// strategies that ignore data centers).
    pub fn local_replication_factor(&self, dc: &str, nodes: usize) -> usize {
        match self {
            ReplicationStrategy::NetworkTopology { datacenters } => {
                datacenters.get(dc).copied().unwrap_or(0)
            }
            other => other.replication_factor(nodes),
        }
    }
}

/// The option map and its parsed strategy. Reads like the map (`get`,
/// `iter`), so the stored form stays what the user wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationParams {
    options: BTreeMap<String, String>,
    pub strategy: ReplicationStrategy,
}

impl ReplicationParams {
    pub fn options(&self) -> &BTreeMap<String, String> {
        &self.options
    }
}

impl From<BTreeMap<String, String>> for ReplicationParams {
    fn from(options: BTreeMap<String, String>) -> Self {
        ReplicationParams {
            strategy: ReplicationStrategy::parse(&options),
            options,
        }
    }
}

impl std::ops::Deref for ReplicationParams {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> ReplicationParams {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
            .into()
    }

    #[test]
    fn strategies_parse_once_from_long_or_short_class_names() {
        let s = params(&[
            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
            ("replication_factor", "3"),
        ]);
        assert_eq!(
            s.strategy,
            ReplicationStrategy::Simple {
                replication_factor: 3
            }
        );
        assert_eq!(s.get("replication_factor").map(String::as_str), Some("3"));
        let n = params(&[
            ("class", "NetworkTopologyStrategy"),
            ("dc1", "3"),
            ("dc2", "2"),
        ]);
        assert_eq!(n.strategy.replication_factor(9), 5);
        assert_eq!(n.strategy.local_replication_factor("dc2", 9), 2);
        assert_eq!(n.strategy.local_replication_factor("dc3", 9), 0);
        let l = params(&[("class", "org.apache.cassandra.locator.LocalStrategy")]);
        assert_eq!(l.strategy, ReplicationStrategy::Local);
        assert_eq!(l.strategy.replication_factor(5), 1);
        let e = params(&[("class", "EverywhereStrategy")]);
        assert_eq!(e.strategy.replication_factor(4), 4);
    }
}
