package netlab

// sysSetns is setns(2)'s number: the standard library's syscall package
// does not name it, and golang.org/x/sys is not a direct dependency.
const sysSetns = 308
