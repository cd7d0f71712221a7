// Runs an AOTInductor package with no Python: loads the operators' libraries,
// the package and the inputs, runs the model once and writes its outputs.
//
//   runner MODEL.pt2 INPUTS.pt OUTPUTS.pt [LIBRARY.so ...]
//
// INPUTS.pt holds a list (or tuple) of tensors, as Python's torch.save writes
// it; they go to the device the package was compiled for. OUTPUTS.pt gets the
// model's outputs as a tuple of CPU tensors, which Python's torch.load reads.
// Built by tools/deploy/build_runner.py (docs/deploying.md).

#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/serialize.h>

#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<char> read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(file), {}};
}

void write_file(const std::string& path, const std::vector<char>& data) {
  std::ofstream file(path, std::ios::binary);
  file.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!file) throw std::runtime_error("cannot write " + path);
}

std::vector<at::Tensor> load_tensors(const std::string& path,
                                     const c10::Device& device) {
  c10::IValue loaded = torch::pickle_load(read_file(path));
  std::vector<c10::IValue> items;
  if (loaded.isTuple()) {
    items = loaded.toTupleRef().elements().vec();
  } else if (loaded.isList()) {
    items = loaded.toList().vec();
  } else {
    throw std::runtime_error(path +
                             ": expected a list or tuple of tensors, got " +
                             loaded.tagKind());
  }
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& item : items) {
    if (!item.isTensor()) {
      throw std::runtime_error(path + ": expected only tensors, got " +
                               item.tagKind());
    }
    tensors.push_back(item.toTensor().to(device));
  }
  return tensors;
}

// The device the package was compiled for, from its metadata.
c10::Device package_device(torch::inductor::AOTIModelPackageLoader& loader) {
  auto metadata = loader.get_metadata();
  auto found = metadata.find("AOTI_DEVICE_KEY");
  return c10::Device(found == metadata.end() ? "cpu" : found->second);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0]
              << " MODEL.pt2 INPUTS.pt OUTPUTS.pt [LIBRARY.so ...]\n";
    return 2;
  }
  // The operators register with the dispatcher as their library loads: before
  // the package, whose calls to them are resolved when it loads.
  for (int i = 4; i < argc; ++i) {
    if (dlopen(argv[i], RTLD_NOW | RTLD_LOCAL) == nullptr) {
      std::cerr << "runner: cannot load " << argv[i] << ": " << dlerror()
                << "\n";
      return 1;
    }
  }
  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    std::vector<at::Tensor> inputs =
        load_tensors(argv[2], package_device(loader));
    std::vector<at::Tensor> outputs = loader.run(inputs);
    // A tuple: a tensor list would pickle as a TorchScript type that torch.load
    // refuses by default (weights_only).
    std::vector<c10::IValue> on_cpu;
    for (const at::Tensor& output : outputs) on_cpu.emplace_back(output.cpu());
    write_file(argv[3], torch::pickle_save(
                            c10::ivalue::Tuple::create(std::move(on_cpu))));
  } catch (const c10::Error& error) {
    std::string message = error.what_without_backtrace();
    std::cerr << "runner: " << message << "\n";
    if (message.find("Could not find schema") != std::string::npos) {
      std::cerr << "runner: the model calls an operator no library given "
                   "defines: pass its library's path after OUTPUTS.pt\n";
    }
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "runner: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
