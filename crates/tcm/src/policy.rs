//! Which members vote.
//!
//! The policy: an odd number of voters, as many as the members allow up to
//! `max_voters` (7 by default); every other member is a learner (it receives
//! and applies the log but does not vote).
//!
//! Why odd: a majority of 2 voters is 2, so two voters survive no failure, the
//! same as one voter, while each voter added is one more node whose loss can
//! stall commits. 4 voters survive one failure, as 3 do. So the second node of
//! a cluster is a learner, the third makes three voters, the fifth five, the
//! seventh seven; later nodes stay learners (more voters make every commit
//! wait for more acknowledgements and buy little).
//!
//! Only members that are caught up with the leader are promoted; a voter that
//! is down is not demoted for it (that would take a membership change nobody
//! asked for), but when the voters must shrink, lagging voters go first.

use std::collections::BTreeSet;

type NodeId = u64;

/// The largest odd number `<= n`, at least 1.
fn odd_at_most(n: usize) -> usize {
    if n == 0 {
        1
    } else if n % 2 == 1 {
        n
    } else {
        n - 1
    }
}

/// The voter set the policy wants, given the current `voters` and
/// `learners`, which members are caught up with the leader, and the leader
/// (never demoted). Returns `voters` unchanged when nothing should change.
pub(crate) fn plan_voters(
    voters: &BTreeSet<NodeId>,
    learners: &BTreeSet<NodeId>,
    caught_up: impl Fn(NodeId) -> bool,
    max_voters: usize,
    leader: NodeId,
) -> BTreeSet<NodeId> {
    let candidates: Vec<NodeId> = learners.iter().copied().filter(|l| caught_up(*l)).collect();
    let target = odd_at_most((voters.len() + candidates.len()).min(max_voters.max(1)));
    let mut out = voters.clone();
    if out.len() < target {
        for c in candidates {
            if out.len() == target {
                break;
            }
            out.insert(c);
        }
    }
    if out.len() > target {
        // Lagging voters first, then the highest ids; never the leader.
        let mut order: Vec<NodeId> = out.iter().copied().filter(|v| *v != leader).collect();
        order.sort_by_key(|v| (caught_up(*v), std::cmp::Reverse(*v)));
        for v in order {
            if out.len() == target {
                break;
            }
            out.remove(&v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[NodeId]) -> BTreeSet<NodeId> {
        v.iter().copied().collect()
    }

    #[test]
    fn grows_by_odd_steps_up_to_seven() {
        let all = |_| true;
        assert_eq!(plan_voters(&set(&[1]), &set(&[2]), all, 7, 1), set(&[1]));
        assert_eq!(
            plan_voters(&set(&[1]), &set(&[2, 3]), all, 7, 1),
            set(&[1, 2, 3])
        );
        assert_eq!(
            plan_voters(&set(&[1, 2, 3]), &set(&[4]), all, 7, 1),
            set(&[1, 2, 3])
        );
        assert_eq!(
            plan_voters(&set(&[1, 2, 3]), &set(&[4, 5]), all, 7, 1),
            set(&[1, 2, 3, 4, 5])
        );
        assert_eq!(
            plan_voters(&set(&[1, 2, 3, 4, 5, 6, 7]), &set(&[8, 9]), all, 7, 1),
            set(&[1, 2, 3, 4, 5, 6, 7])
        );
        assert_eq!(plan_voters(&set(&[1]), &set(&[2, 3]), all, 1, 1), set(&[1]));
    }

    #[test]
    fn only_caught_up_learners_are_promoted() {
        let up = |n| n != 2;
        assert_eq!(plan_voters(&set(&[1]), &set(&[2, 3]), up, 7, 1), set(&[1]));
        assert_eq!(
            plan_voters(&set(&[1]), &set(&[2, 3, 4]), up, 7, 1),
            set(&[1, 3, 4])
        );
    }

    #[test]
    fn shrinks_to_odd_keeping_the_leader_and_dropping_laggards_first() {
        // 2 voters left after a removal: one remains, never the leader
        assert_eq!(
            plan_voters(&set(&[1, 2]), &set(&[]), |_| true, 7, 2),
            set(&[2])
        );
        assert_eq!(
            plan_voters(&set(&[1, 2]), &set(&[]), |_| true, 7, 1),
            set(&[1])
        );
        // 4 voters, 3 lagging behind: the lagging one goes
        assert_eq!(
            plan_voters(&set(&[1, 2, 3, 4]), &set(&[]), |n| n != 3, 7, 1),
            set(&[1, 2, 4])
        );
        // without laggards, the highest id goes
        assert_eq!(
            plan_voters(&set(&[1, 2, 3, 4]), &set(&[]), |_| true, 7, 4),
            set(&[1, 2, 4])
        );
    }
}
