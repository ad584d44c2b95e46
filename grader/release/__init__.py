"""The student release: what `grade release` builds and seals, shared by the verbs that ship one."""
