//! gRPC codecs that decode requests with prost and write responses straight from the
//! cache's shared bytes (see `xdst_core::wire`). Buffers start small: an idle stream
//! should cost as little as possible.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use xdst_core::delta::DeltaResponse;
use xdst_core::sotw::SotwResponse;
use xdst_core::wire;

/// Initial per-stream buffer size; buffers grow for large messages.
const BUFFER: usize = 512;
/// Flush the encode buffer to the socket past this many bytes.
const YIELD: usize = 32 * 1024;

/// Something the server writes.
pub trait Outgoing: Send + 'static {
    fn encoded_len(&self) -> usize;
    fn encode(&self, buf: &mut EncodeBuf<'_>);
}

impl Outgoing for SotwResponse {
    fn encoded_len(&self) -> usize {
        wire::sotw_len(self)
    }
    fn encode(&self, buf: &mut EncodeBuf<'_>) {
        wire::encode_sotw(self, buf)
    }
}

impl Outgoing for DeltaResponse {
    fn encoded_len(&self) -> usize {
        wire::delta_len(self)
    }
    fn encode(&self, buf: &mut EncodeBuf<'_>) {
        wire::encode_delta(self, buf)
    }
}

/// Decodes `Req` with prost, encodes `Resp` from shared bytes.
pub struct XdsCodec<Req, Resp>(PhantomData<fn() -> (Req, Resp)>);

impl<Req, Resp> Default for XdsCodec<Req, Resp> {
    fn default() -> Self {
        XdsCodec(PhantomData)
    }
}

pub struct XdsEncoder<Resp>(PhantomData<fn() -> Resp>);
pub struct XdsDecoder<Req>(PhantomData<fn() -> Req>);

impl<Req, Resp> Codec for XdsCodec<Req, Resp>
where
    Req: Message + Default + Send + 'static,
    Resp: Outgoing,
{
    type Encode = Resp;
    type Decode = Req;
    type Encoder = XdsEncoder<Resp>;
    type Decoder = XdsDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        XdsEncoder(PhantomData)
    }
    fn decoder(&mut self) -> Self::Decoder {
        XdsDecoder(PhantomData)
    }
}

impl<Resp: Outgoing> Encoder for XdsEncoder<Resp> {
    type Item = Resp;
    type Error = Status;

    fn encode(&mut self, item: Resp, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst);
        Ok(())
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}

impl<Req: Message + Default> Decoder for XdsDecoder<Req> {
    type Item = Req;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Req>, Status> {
        Req::decode(src).map(Some).map_err(|e| {
            Status::invalid_argument(format!(
                "malformed {}: {e}",
                std::any::type_name::<Req>().rsplit("::").next().unwrap_or("request")
            ))
        })
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}
