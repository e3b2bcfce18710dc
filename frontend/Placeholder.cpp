// placeholder until the frontend lands
namespace kiln::frontend {}
