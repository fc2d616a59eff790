//! The reconcilers the Lambdas (and the simulator) run: read the truth through [`ports`], decide
//! with the pure core, carry the decisions out through the same ports.

pub mod ports;
