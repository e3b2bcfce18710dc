#include "ir/GraphAlgorithms.h"

#include <functional>
#include <queue>
#include <unordered_map>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/topological_sort.hpp>

#include "core/Error.h"

namespace kiln::ir {

using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
using Vertex = boost::graph_traits<BoostGraph>::vertex_descriptor;

struct DependenceGraph::Impl {
  BoostGraph graph;
  std::vector<Node *> nodes;
  std::unordered_map<const Node *, Vertex> vertexOf;

  Vertex vertex(const Node *node) const {
    auto it = vertexOf.find(node);
    if (it == vertexOf.end())
      fail("node ({}) is not part of this dependence graph", node->opName());
    return it->second;
  }

  // Marks every vertex reachable from the given ones (excluding the start set itself unless
  // an edge leads back to it) with boost::breadth_first_search.
  std::vector<bool> reachable(const std::vector<Vertex> &sources) const {
    std::vector<bool> seen(boost::num_vertices(graph), false);
    struct Recorder : boost::default_bfs_visitor {
      std::vector<bool> *seen;
      void tree_edge(boost::graph_traits<BoostGraph>::edge_descriptor e, const BoostGraph &g) const {
        (*seen)[boost::target(e, g)] = true;
      }
      void non_tree_edge(boost::graph_traits<BoostGraph>::edge_descriptor e, const BoostGraph &g) const {
        (*seen)[boost::target(e, g)] = true;
      }
    } recorder;
    recorder.seen = &seen;
    std::vector<boost::default_color_type> colors(boost::num_vertices(graph), boost::white_color);
    auto colorMap = boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, graph));
    boost::queue<Vertex> queue;
    for (Vertex source : sources)
      if (colors[source] == boost::white_color)
        boost::breadth_first_visit(graph, source, queue, recorder, colorMap);
    return seen;
  }
};

DependenceGraph::DependenceGraph(const Graph &graph) : impl_(std::make_unique<Impl>()) {
  impl_->nodes = graph.nodes();
  impl_->graph = BoostGraph(impl_->nodes.size());
  for (size_t i = 0; i < impl_->nodes.size(); ++i)
    impl_->vertexOf[impl_->nodes[i]] = i;
  for (size_t i = 0; i < impl_->nodes.size(); ++i)
    for (Value *input : impl_->nodes[i]->inputs())
      if (Node *producer = input->producer())
        boost::add_edge(impl_->vertex(producer), i, impl_->graph);
}

DependenceGraph::~DependenceGraph() = default;

size_t DependenceGraph::numNodes() const { return impl_->nodes.size(); }

std::vector<Node *> DependenceGraph::topologicalOrder() const {
  std::vector<Vertex> reversed;
  try {
    boost::topological_sort(impl_->graph, std::back_inserter(reversed));
  } catch (const boost::not_a_dag &) {
    fail("the dependence graph has a cycle");
  }
  std::vector<Node *> order;
  for (auto it = reversed.rbegin(); it != reversed.rend(); ++it)
    order.push_back(impl_->nodes[*it]);
  return order;
}

bool DependenceGraph::reaches(const Node *from, const Node *to) const {
  return impl_->reachable({impl_->vertex(from)})[impl_->vertex(to)];
}

std::vector<Node *> DependenceGraph::reachableFrom(const std::vector<const Node *> &sources) const {
  std::vector<Vertex> starts;
  for (const Node *node : sources)
    starts.push_back(impl_->vertex(node));
  std::vector<bool> seen = impl_->reachable(starts);
  std::vector<Node *> out;
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i])
      out.push_back(impl_->nodes[i]);
  return out;
}

void DependenceGraph::addEdge(const Node *from, const Node *to) {
  boost::add_edge(impl_->vertex(from), impl_->vertex(to), impl_->graph);
}

bool DependenceGraph::hasCycle() const {
  try {
    topologicalOrder();
    return false;
  } catch (const Error &) {
    return true;
  }
}

std::vector<Node *> DependenceGraph::stableTopologicalOrder() const {
  const BoostGraph &g = impl_->graph;
  std::vector<size_t> inDegree(boost::num_vertices(g), 0);
  for (Vertex v = 0; v < inDegree.size(); ++v)
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
      ++inDegree[boost::target(*e, g)];
  std::priority_queue<Vertex, std::vector<Vertex>, std::greater<Vertex>> ready;
  for (Vertex v = 0; v < inDegree.size(); ++v)
    if (inDegree[v] == 0)
      ready.push(v);
  std::vector<Node *> order;
  while (!ready.empty()) {
    Vertex v = ready.top();
    ready.pop();
    order.push_back(impl_->nodes[v]);
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
      if (--inDegree[boost::target(*e, g)] == 0)
        ready.push(boost::target(*e, g));
  }
  if (order.size() != impl_->nodes.size())
    fail("the dependence graph has a cycle");
  return order;
}

void sortTopologically(Graph &graph) {
  for (Node *node : DependenceGraph(graph).stableTopologicalOrder())
    graph.moveBefore(node, nullptr);
}

} // namespace kiln::ir
