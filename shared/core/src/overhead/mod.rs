//! AL2023 node overhead model. PLACEHOLDER: being written.

use crate::catalog::Ec2Facts;
use crate::model::KubeletConfig;
use crate::resources::Resources;

pub fn capacity(_facts: &Ec2Facts, _kubelet: &KubeletConfig) -> Resources {
    todo!()
}

pub fn allocatable(_facts: &Ec2Facts, _kubelet: &KubeletConfig) -> Resources {
    todo!()
}
