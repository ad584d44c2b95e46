"""The grader's ground floor, which every other floor may use and which uses none of them: the piece registry
(`pieces`), how a child process starts (`host`) and with what environment (`childenv`), reading an untrusted file
(`files`), the toy task's data checked against its released digests (`datasets`), and the record of measured times
(`measured`)."""
