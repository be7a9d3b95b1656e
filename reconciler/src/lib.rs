//! kairon-reconciler: the controllers. Each decides in a pure function of the objects and the
//! clock, and acts at the edge.

pub mod scheduler;
