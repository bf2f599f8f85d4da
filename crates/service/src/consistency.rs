//! Consistency levels (Cassandra's `ConsistencyLevel`): how many replicas a
//! level needs, and which levels a read or a write accepts.

use crate::error::{Result, ServiceError};
use sibyl_protocol::Consistency;
use sibyl_schema::ReplicationStrategy;

/// `floor(rf / 2) + 1`.
pub fn quorum_for(rf: usize) -> usize {
    rf / 2 + 1
}

/// Replicas that must answer for `cl`, given the keyspace's strategy, the
/// coordinator's data center and the number of nodes in the ring.
pub fn block_for(
    strategy: &ReplicationStrategy,
    cl: Consistency,
    local_dc: &str,
    nodes: usize,
) -> usize {
    let rf = strategy.replication_factor(nodes);
    match cl {
        Consistency::Any | Consistency::One | Consistency::LocalOne => 1,
        Consistency::Two => 2,
        Consistency::Three => 3,
        Consistency::Quorum | Consistency::Serial => quorum_for(rf),
        Consistency::All => rf,
        Consistency::LocalQuorum | Consistency::LocalSerial => {
            quorum_for(strategy.local_replication_factor(local_dc, nodes))
        }
        Consistency::EachQuorum => match strategy {
            ReplicationStrategy::NetworkTopology { datacenters } => {
                datacenters.values().map(|rf| quorum_for(*rf)).sum()
            }
            _ => quorum_for(rf),
        },
    }
}

/// Whether `cl` counts only replicas of the coordinator's data center.
pub fn is_datacenter_local(cl: Consistency) -> bool {
    matches!(
        cl,
        Consistency::LocalOne | Consistency::LocalQuorum | Consistency::LocalSerial
    )
}

/// Cassandra's `validateForWrite` (non-conditional writes).
pub fn validate_for_write(cl: Consistency) -> Result<()> {
    if cl.is_serial() {
        return Err(ServiceError::Invalid(
            "You must use conditional updates for serializable writes".into(),
        ));
    }
    Ok(())
}

/// Cassandra's `validateForRead`.
pub fn validate_for_read(cl: Consistency) -> Result<()> {
    if cl == Consistency::Any {
        return Err(ServiceError::Invalid(
            "ANY ConsistencyLevel is only supported for writes".into(),
        ));
    }
    Ok(())
}

/// The level a lightweight transaction's read runs at: SERIAL reads at
/// QUORUM, LOCAL_SERIAL at LOCAL_QUORUM.
pub fn serial_read_level(serial: Consistency) -> Consistency {
    if serial == Consistency::LocalSerial {
        Consistency::LocalQuorum
    } else {
        Consistency::Quorum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn simple(rf: usize) -> ReplicationStrategy {
        ReplicationStrategy::Simple {
            replication_factor: rf,
        }
    }

    fn nts(dcs: &[(&str, usize)]) -> ReplicationStrategy {
        ReplicationStrategy::NetworkTopology {
            datacenters: dcs
                .iter()
                .map(|(d, r)| (d.to_string(), *r))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn quorum_is_half_the_replication_factor_plus_one() {
        let cases = [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4)];
        for (rf, q) in cases {
            assert_eq!(
                block_for(&simple(rf), Consistency::Quorum, "dc1", 9),
                q,
                "rf {rf}"
            );
        }
        assert_eq!(block_for(&simple(3), Consistency::All, "dc1", 9), 3);
        assert_eq!(block_for(&simple(3), Consistency::One, "dc1", 9), 1);
        assert_eq!(block_for(&simple(3), Consistency::Two, "dc1", 9), 2);
        assert_eq!(block_for(&simple(3), Consistency::Any, "dc1", 9), 1);
        assert_eq!(block_for(&simple(3), Consistency::Serial, "dc1", 9), 2);
    }

    #[test]
    fn network_topology_levels_count_per_datacenter() {
        let s = nts(&[("dc1", 3), ("dc2", 2)]);
        // QUORUM over the sum of the factors: 5 / 2 + 1
        assert_eq!(block_for(&s, Consistency::Quorum, "dc1", 9), 3);
        assert_eq!(block_for(&s, Consistency::All, "dc1", 9), 5);
        assert_eq!(block_for(&s, Consistency::LocalQuorum, "dc1", 9), 2);
        assert_eq!(block_for(&s, Consistency::LocalQuorum, "dc2", 9), 2);
        assert_eq!(block_for(&s, Consistency::LocalSerial, "dc2", 9), 2);
        // each data center's quorum: 2 + 2
        assert_eq!(block_for(&s, Consistency::EachQuorum, "dc1", 9), 4);
        // a data center without replicas needs one (and will find none)
        assert_eq!(block_for(&s, Consistency::LocalQuorum, "dc3", 9), 1);
        assert_eq!(
            block_for(
                &ReplicationStrategy::Everywhere,
                Consistency::Quorum,
                "x",
                4
            ),
            3
        );
        assert_eq!(
            block_for(&ReplicationStrategy::Local, Consistency::All, "x", 4),
            1
        );
    }

    #[test]
    fn reads_refuse_any_and_writes_refuse_serial() {
        assert!(validate_for_read(Consistency::Any).is_err());
        assert!(validate_for_read(Consistency::Serial).is_ok());
        assert!(validate_for_write(Consistency::Serial).is_err());
        assert!(validate_for_write(Consistency::LocalSerial).is_err());
        assert!(validate_for_write(Consistency::Any).is_ok());
        assert_eq!(
            serial_read_level(Consistency::LocalSerial),
            Consistency::LocalQuorum
        );
        assert_eq!(serial_read_level(Consistency::Serial), Consistency::Quorum);
    }
}
