#!/usr/bin/env node
// The installed `cos-admin` bin. A committed shim (rather than pointing "bin" at dist/) lets pnpm
// link the bin on a fresh clone before the first build, without a warning.
import '../dist/main.js';
