// cooperative_groups: the thread block, tiled partitions of 32 and smaller, their
// shuffles, votes and reductions, scans, a dynamic partition and coalesced threads.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;

__device__ float tile_sum(cg::thread_block_tile<32> tile, float v)
{
    for (int o = tile.size() / 2; o > 0; o /= 2)
        v += tile.shfl_down(v, o);
    return v;
}

extern "C" __global__ void block_sum(const float* x, float* out)
{
    cg::thread_block block = cg::this_thread_block();
    __shared__ float part[32];
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    float v = x[block.group_index().x * block.size() + block.thread_rank()];
    float s = tile_sum(tile, v);
    if (tile.thread_rank() == 0) part[tile.meta_group_rank()] = s;
    block.sync();
    if (tile.meta_group_rank() == 0) {
        float w = tile.thread_rank() < tile.meta_group_size() ? part[tile.thread_rank()] : 0.0f;
        w = cg::reduce(tile, w, cg::plus<float>());
        if (block.thread_rank() == 0) out[blockIdx.x] = w;
    }
}

// For tiles of 16, 8, 4 and 2: [size][op][thread] with ops sum, max, min, shfl from rank 1,
// shfl_xor 1, shfl_up 1, shfl_down 1, ballot, any, all, inclusive and exclusive scan, rank,
// meta_group_rank.
#define TILE_OPS(S, base)                                            \
    {                                                                \
        cg::thread_block_tile<S> t = cg::tiled_partition<S>(block);  \
        int k = base;                                                \
        out[k++ * n + i] = cg::reduce(t, v, cg::plus<int>());        \
        out[k++ * n + i] = cg::reduce(t, v, cg::greater<int>());     \
        out[k++ * n + i] = cg::reduce(t, v, cg::less<int>());        \
        out[k++ * n + i] = t.shfl(v, 1);                             \
        out[k++ * n + i] = t.shfl_xor(v, 1);                         \
        out[k++ * n + i] = t.shfl_up(v, 1);                          \
        out[k++ * n + i] = t.shfl_down(v, 1);                        \
        out[k++ * n + i] = (int)t.ballot(v > 0);                     \
        out[k++ * n + i] = t.any(v > 90);                            \
        out[k++ * n + i] = t.all(v > -90);                           \
        out[k++ * n + i] = cg::inclusive_scan(t, v);                 \
        out[k++ * n + i] = cg::exclusive_scan(t, v, cg::plus<int>()); \
        out[k++ * n + i] = (int)t.thread_rank();                     \
        out[k++ * n + i] = (int)t.meta_group_rank();                 \
        t.sync();                                                    \
    }

extern "C" __global__ void tiles(const int* x, int* out)
{
    cg::thread_block block = cg::this_thread_block();
    int i = block.thread_rank(), v = x[i], n = block.num_threads();
    TILE_OPS(16, 0) TILE_OPS(8, 14) TILE_OPS(4, 28) TILE_OPS(2, 42)
    cg::sync(block);
}

// A generic thread_group from a dynamic partition, and the coalesced threads of a branch.
extern "C" __global__ void groups(const int* x, int* part_rank, int* odd_sum, int* odd_rank)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_group g = cg::tiled_partition(block, 8);
    int i = block.thread_rank();
    part_rank[i] = (int)g.thread_rank() + 100 * (int)g.size();
    g.sync();
    odd_sum[i] = odd_rank[i] = -1;
    if (x[i] % 2) {
        cg::coalesced_group odd = cg::coalesced_threads();
        odd_sum[i] = cg::reduce(odd, x[i], cg::plus<int>());
        odd_rank[i] = (int)odd.thread_rank() + 100 * (int)odd.size();
    }
}
