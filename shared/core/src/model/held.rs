//! The objects besides Nodes and NodeClaims that Dovetail's termination finalizer holds, named
//! as actions and Events name them (`NodePool/x`, `EC2NodeClass/x`).

use super::{NodeClass, NodePool};

/// A NodePool or EC2NodeClass, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held<'a> {
    NodePool(&'a str),
    NodeClass(&'a str),
}

impl<'a> Held<'a> {
    /// `NodePool/x` or `EC2NodeClass/x`; anything else is `None`.
    pub fn parse(object: &'a str) -> Option<Held<'a>> {
        match object.split_once('/')? {
            (_, "") => None,
            ("NodePool", name) if !name.contains('/') => Some(Held::NodePool(name)),
            ("EC2NodeClass", name) if !name.contains('/') => Some(Held::NodeClass(name)),
            _ => None,
        }
    }
}

/// Dovetail's termination finalizer put on (`held`) or taken off `object` among `pools` and
/// `classes`. Taken off one being deleted, its deletion completes: it is gone from the list.
pub fn hold(pools: &mut Vec<NodePool>, classes: &mut Vec<NodeClass>, object: &str, held: bool) {
    match Held::parse(object) {
        Some(Held::NodePool(name)) => {
            pools.iter_mut().filter(|p| p.name == name).for_each(|p| p.termination_finalizer = held);
            pools.retain(|p| p.termination_finalizer || !p.deleting);
        }
        Some(Held::NodeClass(name)) => {
            classes.iter_mut().filter(|c| c.name == name).for_each(|c| c.termination_finalizer = held);
            classes.retain(|c| c.termination_finalizer || !c.deleting);
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_while_deleted_is_gone() {
        let (mut pools, mut classes) = (vec![NodePool::new("web", "c")], vec![NodeClass::default()]);
        hold(&mut pools, &mut classes, "NodePool/web", true);
        assert!(pools[0].termination_finalizer);
        pools[0].deleting = true;
        hold(&mut pools, &mut classes, "NodePool/other", false);
        assert_eq!(pools.len(), 1, "another pool's release leaves it");
        hold(&mut pools, &mut classes, "NodePool/web", false);
        assert!(pools.is_empty());
        assert_eq!(classes.len(), 1);
    }

    #[test]
    fn names() {
        assert_eq!(Held::parse("NodePool/web"), Some(Held::NodePool("web")));
        assert_eq!(Held::parse("EC2NodeClass/default"), Some(Held::NodeClass("default")));
        for other in ["Node/n", "NodePool/", "NodePool", "NodePool/a/b", "ec2nodeclass/x"] {
            assert_eq!(Held::parse(other), None, "{other}");
        }
    }
}
