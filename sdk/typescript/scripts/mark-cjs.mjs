// The CommonJS build (tsconfig.cjs.json) sits under a package.json of its own that says so:
// the package itself is ESM ("type": "module").
import { writeFileSync } from "node:fs";
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
