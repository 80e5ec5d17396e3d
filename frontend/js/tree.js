// A walk over a nested tree of `children` lists (ELK's graphs: boxes in boxes), with a stack of
// levels instead of recursion, so no nesting depth runs out of call stack.

/** visit(node, parent, depth) for every node under `root`, depth first, in list order. */
export function walkTree(root, visit) {
  const stack = [{ list: root.children || [], at: 0, parent: root, depth: 0 }];
  while (stack.length) {
    const level = stack[stack.length - 1];
    if (level.at >= level.list.length) {
      stack.pop();
      continue;
    }
    const node = level.list[level.at++];
    visit(node, level.parent, level.depth);
    if (node.children && node.children.length) stack.push({ list: node.children, at: 0, parent: node, depth: level.depth + 1 });
  }
}
