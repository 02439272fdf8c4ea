//! Instrument sets: inference (GenAI semantic conventions), RL, Gym and
//! training (`nv.dl.*`) metrics.
