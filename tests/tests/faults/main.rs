//! Faults a user meets in production (a full disk, a file-size limit,
//! non-finite numbers), each provoked in a real child process configured only
//! through the environment.

mod file;
