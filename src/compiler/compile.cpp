// Compiler entry point: filled in by the compile pipeline (see compile.h).
