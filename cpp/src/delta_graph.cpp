// The delta graph (delta_graph.hpp).
#include "vecgraph/delta_graph.hpp"

namespace vecgraph {

DeltaAdjacency DeltaAdjacency::rebased(const EdgeColumns& edges, std::size_t base_edges) const {
    DeltaAdjacency delta;
    delta.slot.reserve(slot.capacity());
    delta.slot.assign(slot.size(), 0);
    delta.add_range(edges, base_edges);
    return delta;
}

}  // namespace vecgraph
