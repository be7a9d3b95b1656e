// Every public name of the SDK has a doc comment: each export of the package's entry points
// (Node's and the browser's), and each public member of the classes and interfaces among them
// (not the generated OpenAPI types, whose docs come from openapi/openapi.json). Prints what lacks
// one and exits non-zero; run by tests/tests/sdk.rs.
import ts from "typescript";

const root = new URL("..", import.meta.url).pathname;
const config = ts.getParsedCommandLineOfConfigFile(`${root}tsconfig.json`, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
const program = ts.createProgram([`${root}src/index.ts`, `${root}src/browser.ts`], config.options);
const checker = program.getTypeChecker();
const missing = new Set();
const documented = (sym) => sym.getDocumentationComment(checker).some((p) => p.text.trim());
const isPublic = (decl) => {
  const flags = ts.getCombinedModifierFlags(decl);
  return !(flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) && !(decl.name && ts.isPrivateIdentifier(decl.name));
};

for (const entry of ["index.ts", "browser.ts"]) {
  const file = program.getSourceFile(`${root}src/${entry}`);
  for (let sym of checker.getExportsOfModule(checker.getSymbolAtLocation(file))) {
    if (sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym);
    const decl = sym.declarations?.[0];
    if (!decl || decl.getSourceFile().fileName.includes("/generated/")) continue;
    const where = `${decl.getSourceFile().fileName.slice(root.length)}: ${sym.name}`;
    if (!documented(sym)) missing.add(where);
    if (!(sym.flags & (ts.SymbolFlags.Class | ts.SymbolFlags.Interface))) continue;
    for (const member of sym.members?.values() ?? []) {
      const m = member.declarations?.[0];
      if (!m || !isPublic(m) || member.name === "__constructor" || member.name.startsWith("__@")) continue;
      // An override (an error class's `name`) is what its base declares.
      if (ts.getCombinedModifierFlags(m) & ts.ModifierFlags.Override) continue;
      if (ts.isIndexSignatureDeclaration(m)) continue;
      if (!documented(member)) missing.add(`${where}.${member.name}`);
    }
  }
}
if (missing.size) {
  console.error(`${missing.size} public names have no doc comment:\n${[...missing].sort().join("\n")}`);
  process.exit(1);
}
console.log("every public name has a doc comment");
